//! The training view of a sample: the row the pre-tokenized export writes for it (one row per
//! conversation, before the length limit), each token decoded, the supervised ones marked, so a
//! reviewer sees what the draft model will learn. From the captured ids when the sample has
//! them, else rendered and encoded as the re-tokenizing export does; the same code makes both.

use super::captured;
use super::conversation;
use super::selection;
use super::tokenize::RowTokenizer;
use super::Storage;
use crate::{Error, Result};
use domain::export::{Overlong, ReasoningStyle, TurnRows};
use domain::review::{TrainingSource, TrainingToken, TrainingView};
use sqlx::PgPool;
use std::path::Path;
use tokenizers::Tokenizer;

/// The tokenizer folder of the latest tokenized export, the view's default.
pub async fn default_tokenizer_dir(pool: &PgPool) -> Result<Option<String>> {
    Ok(sqlx::query_scalar!(
        r#"SELECT spec #>> '{format,tokenization,tokenizer_dir}' AS "dir!"
           FROM exports
           WHERE spec #>> '{format,layout}' = 'tokenized'
             AND coalesce(spec #>> '{format,tokenization,tokenizer_dir}', '') <> ''
           ORDER BY id DESC LIMIT 1"#
    )
    .fetch_optional(pool)
    .await?)
}

pub async fn load(
    pool: &PgPool,
    storage: &Storage,
    sample_id: i64,
    tokenizer_dir: Option<String>,
) -> Result<TrainingView> {
    let tokenizer_dir = match tokenizer_dir.filter(|d| !d.trim().is_empty()) {
        Some(dir) => dir,
        None => default_tokenizer_dir(pool).await?.ok_or_else(|| {
            Error::invalid(
                "give the folder (under a storage root) holding the target model's tokenizer.json \
                 and tokenizer_config.json",
            )
        })?,
    };
    let dir = storage.resolve(&tokenizer_dir, false)?;
    let row = selection::fetch(pool, &[sample_id])
        .await?
        .pop()
        .ok_or_else(|| Error::invalid("this sample has no answer yet: there is nothing to train on"))?;
    let has_ids = sqlx::query_scalar!("SELECT captured_token_ids FROM samples WHERE id = $1", sample_id)
        .fetch_one(pool)
        .await?
        == Some(true);
    let requests = if has_ids { captured::fetch(pool, &[sample_id]).await?.remove(&sample_id) } else { None };
    let conversation = conversation::from_row(row, ReasoningStyle::Field)?;
    let view = tokio::task::spawn_blocking(move || -> Result<TrainingView> {
        let (source, tokenizer, ids, mask, unsupervised_turns) = match requests {
            Some(requests) => {
                let row = captured::rows(&conversation.id, &requests, TurnRows::PerConversation)
                    .pop()
                    .ok_or_else(|| Error::invalid("this sample's answer came with no token ids"))?;
                let tokenizer = load_tokenizer(&dir)?;
                (TrainingSource::Captured, tokenizer, row.input_ids, row.loss_mask, row.unsupervised_turns)
            }
            None => {
                let rows = RowTokenizer::from_dir(&dir, u32::MAX, Overlong::Truncate)?;
                let encoded = rows.encode_conversation(&conversation)?;
                let tokenizer = rows.tokenizer().clone();
                (
                    TrainingSource::Retokenized,
                    tokenizer,
                    encoded.input_ids,
                    encoded.loss_mask,
                    encoded.unsupervised_turns,
                )
            }
        };
        let tokens = decode(&tokenizer, &ids, &mask)?;
        Ok(TrainingView {
            source,
            tokenizer_dir,
            supervised: mask.iter().map(|&m| u32::from(m)).sum(),
            tokens,
            unsupervised_turns,
        })
    })
    .await
    .map_err(|e| Error::Internal(e.into()))??;
    Ok(view)
}

fn load_tokenizer(dir: &Path) -> Result<Tokenizer> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Err(Error::invalid(format!("{} has no tokenizer.json", dir.display())));
    }
    Tokenizer::from_file(&path)
        .map_err(|e| Error::invalid(format!("{} cannot be loaded: {e}", path.display())))
}

/// Each token's text as a streaming decoder gives it: a token that ends inside a character adds
/// nothing, the one completing it adds the whole character.
fn decode(tokenizer: &Tokenizer, ids: &[u32], mask: &[u8]) -> Result<Vec<TrainingToken>> {
    let mut stream = tokenizer.decode_stream(false);
    ids.iter()
        .zip(mask)
        .map(|(&id, &m)| {
            let text = stream
                .step(id)
                .map_err(|e| {
                    Error::invalid(format!("token id {id} is not in this tokenizer's vocabulary: {e}"))
                })?
                .unwrap_or_default();
            Ok(TrainingToken { id, text, supervised: m == 1 })
        })
        .collect()
}
