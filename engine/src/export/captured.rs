//! Pre-tokenized rows from the ids the server reported (`return_token_ids`, stored per request
//! in `sample_tokens`): exactly the tokens the target model was given and the tokens it wrote,
//! never re-rendered or re-encoded.
//!
//! A request's row is its prompt ids then its completion ids, with `loss_mask` 0 over the prompt
//! and 1 over the completion, the end-of-turn token included: vLLM returns the end-of-sequence
//! token it stopped on (`<|im_end|>`, `<|eot_id|>`) as the last completion id, and both SpecForge
//! (its `assistant_header … end_of_turn_token` spans) and speculators (1 over generated tokens)
//! supervise it. An answer cut at `max_tokens` has no end token and gets none added.
//!
//! A conversation regenerated turn by turn has one request per assistant turn. As one row per
//! conversation, the row is the last request and its answer; an earlier answer is supervised too
//! when the last prompt repeats that request and answer token for token at its start (the
//! template re-renders the history as it was generated). Where it does not (Qwen3 drops earlier
//! reasoning from the history; a model's tokenization of its own text can differ from the
//! tokenizer's), that answer is left unsupervised and counted, never guessed.

use super::tokenize::{Outcome, Tokenized};
use crate::samples::token_ids;
use crate::{Error, Result};
use domain::export::{Overlong, TurnRows};
use sqlx::PgPool;
use std::collections::HashMap;

/// One request's ids as the server reported them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub prompt: Vec<u32>,
    pub completion: Vec<u32>,
}

/// Reads the captured ids of `ids`, each sample's requests in order.
pub async fn fetch(pool: &PgPool, ids: &[i64]) -> Result<HashMap<i64, Vec<Request>>> {
    let rows = sqlx::query!(
        "SELECT sample_id, turn, prompt_ids, completion_ids FROM sample_tokens
         WHERE sample_id = ANY($1) ORDER BY sample_id, turn",
        ids
    )
    .fetch_all(pool)
    .await?;
    let mut out: HashMap<i64, Vec<Request>> = HashMap::new();
    for row in rows {
        let unpack = |bytes: &[u8]| {
            token_ids::unpack(bytes).map_err(|e| {
                Error::Internal(anyhow::anyhow!(
                    "sample {}'s stored token ids are damaged: {e}",
                    row.sample_id
                ))
            })
        };
        let request = Request { prompt: unpack(&row.prompt_ids)?, completion: unpack(&row.completion_ids)? };
        out.entry(row.sample_id).or_default().push(request);
    }
    Ok(out)
}

/// How many of `ids` have no captured ids (their server did not return them).
pub async fn missing(pool: &PgPool, ids: &[i64]) -> Result<u64> {
    let n = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM samples WHERE id = ANY($1) AND captured_token_ids IS NOT TRUE"#,
        ids
    )
    .fetch_one(pool)
    .await?;
    Ok(n as u64)
}

/// The length limit applied to every tokenized row, captured or re-tokenized.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub max_length: usize,
    pub overlong: Overlong,
}

impl Limit {
    /// Cuts or drops a row longer than the limit, and drops one with nothing to learn.
    pub fn apply(&self, mut row: Tokenized) -> Outcome {
        if row.input_ids.len() > self.max_length {
            match self.overlong {
                Overlong::Drop => return Outcome::DroppedOverlong,
                Overlong::Truncate => {
                    row.input_ids.truncate(self.max_length);
                    row.loss_mask.truncate(self.max_length);
                    row.truncated = true;
                }
            }
        }
        if !row.loss_mask.contains(&1) {
            return Outcome::DroppedNoLoss;
        }
        Outcome::Row(row)
    }
}

/// The rows of one sample, before the length limit.
pub fn rows(id: &str, requests: &[Request], turn_rows: TurnRows) -> Vec<Tokenized> {
    match (turn_rows, requests) {
        (_, []) => Vec::new(),
        (TurnRows::PerTurn, [only]) => vec![request_row(id.to_string(), only)],
        (TurnRows::PerTurn, many) => {
            many.iter().enumerate().map(|(k, r)| request_row(format!("{id}_turn{k}"), r)).collect()
        }
        (TurnRows::PerConversation, [earlier @ .., last]) => {
            let mut row = request_row(id.to_string(), last);
            for request in earlier {
                let end = request.prompt.len() + request.completion.len();
                let repeated = last.prompt.len() >= end
                    && last.prompt[..request.prompt.len()] == request.prompt[..]
                    && last.prompt[request.prompt.len()..end] == request.completion[..];
                if repeated {
                    row.loss_mask[request.prompt.len()..end].fill(1);
                } else {
                    row.unsupervised_turns += 1;
                }
            }
            vec![row]
        }
    }
}

fn request_row(id: String, request: &Request) -> Tokenized {
    let mut input_ids = Vec::with_capacity(request.prompt.len() + request.completion.len());
    input_ids.extend_from_slice(&request.prompt);
    input_ids.extend_from_slice(&request.completion);
    let mut loss_mask = vec![0u8; input_ids.len()];
    loss_mask[request.prompt.len()..].fill(1);
    Tokenized { id, input_ids, loss_mask, truncated: false, unsupervised_turns: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prompt: &[u32], completion: &[u32]) -> Request {
        Request { prompt: prompt.to_vec(), completion: completion.to_vec() }
    }

    #[test]
    fn a_row_is_the_prompt_unsupervised_then_the_answer_supervised() {
        let rows = rows("4-a", &[request(&[1, 2, 3], &[7, 8, 9])], TurnRows::PerConversation);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].id, "4-a");
        assert_eq!(rows[0].input_ids, [1, 2, 3, 7, 8, 9]);
        assert_eq!(rows[0].loss_mask, [0, 0, 0, 1, 1, 1]);
        // A single request is the same row either way.
        let per_turn = super::rows("4-a", &[request(&[1, 2, 3], &[7, 8, 9])], TurnRows::PerTurn);
        assert_eq!(per_turn[0].input_ids, rows[0].input_ids);
        assert_eq!(per_turn[0].id, "4-a");
    }

    #[test]
    fn per_turn_rows_are_each_one_request_and_its_answer() {
        let turns = [request(&[1, 2], &[5, 6]), request(&[1, 2, 5, 6, 3], &[8])];
        let rows = rows("r", &turns, TurnRows::PerTurn);
        assert_eq!(rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["r_turn0", "r_turn1"]);
        assert_eq!(rows[1].input_ids, [1, 2, 5, 6, 3, 8]);
        assert_eq!(rows[1].loss_mask, [0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn a_conversation_row_supervises_earlier_answers_its_history_repeats_exactly() {
        // Turn 0's prompt and answer open turn 1's prompt: both answers are learned.
        let repeated = [request(&[1, 2], &[5, 6]), request(&[1, 2, 5, 6, 3], &[8, 9])];
        let row = &rows("r", &repeated, TurnRows::PerConversation)[0];
        assert_eq!(row.input_ids, [1, 2, 5, 6, 3, 8, 9]);
        assert_eq!(row.loss_mask, [0, 0, 1, 1, 0, 1, 1]);
        assert_eq!(row.unsupervised_turns, 0);
        // The history renders turn 0's answer differently (its reasoning dropped): unsupervised.
        let rewritten = [request(&[1, 2], &[4, 5, 6]), request(&[1, 2, 6, 3], &[8])];
        let row = &rows("r", &rewritten, TurnRows::PerConversation)[0];
        assert_eq!(row.loss_mask, [0, 0, 0, 0, 1]);
        assert_eq!(row.unsupervised_turns, 1);
    }

    #[test]
    fn the_limit_cuts_or_drops_and_drops_rows_without_loss() {
        let row = || rows("r", &[request(&[1, 2, 3], &[7, 8])], TurnRows::PerTurn).remove(0);
        let cut = Limit { max_length: 4, overlong: Overlong::Truncate };
        match cut.apply(row()) {
            Outcome::Row(r) => {
                assert_eq!(r.input_ids, [1, 2, 3, 7]);
                assert!(r.truncated);
            }
            _ => panic!("a truncated row with loss is kept"),
        }
        let short = Limit { max_length: 3, overlong: Overlong::Truncate };
        assert!(matches!(short.apply(row()), Outcome::DroppedNoLoss));
        let drop = Limit { max_length: 4, overlong: Overlong::Drop };
        assert!(matches!(drop.apply(row()), Outcome::DroppedOverlong));
    }
}
