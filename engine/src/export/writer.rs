//! Data files: JSONL or Parquet rows of one layout. Rows are written in the order given (the
//! plan's id order) and no file holds a timestamp, so the same export gives the same bytes.

use super::conversation::Conversation;
use super::tokenize::Tokenized;
use crate::generation::conversation::Turn;
use crate::{Error, Result};
use arrow_array::builder::{Int32Builder, Int8Builder, ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use domain::export::{FileFormat, Layout};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

/// Rows per Parquet row group: bounds what the writer holds in memory.
const ROW_GROUP: usize = 1024;

// One per export, kept for its whole run: boxing the Parquet writer would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum DataWriter {
    Jsonl { out: BufWriter<File>, layout: Layout },
    Parquet { out: ArrowWriter<File>, layout: Layout, schema: SchemaRef },
}

/// What a row says about its sample beside its content: how the draft accepted on it, when an
/// evaluation (or a run on a target+draft server) measured it. JSONL rows carry it as
/// `metadata`, Parquet rows as two nullable columns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RowMetadata {
    /// Tokens the target emitted per verify step of the draft on this sample.
    pub acceptance_length: f64,
    pub verify_steps: u32,
}

#[derive(Serialize)]
struct SpecForgeRow<'a> {
    id: &'a str,
    conversations: &'a [Turn],
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<RowMetadata>,
}

#[derive(Serialize)]
struct OpenAiRow<'a> {
    id: &'a str,
    messages: &'a [Turn],
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<RowMetadata>,
}

#[derive(Serialize)]
struct TokenizedRow<'a> {
    id: &'a str,
    input_ids: &'a [u32],
    loss_mask: &'a [u8],
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<RowMetadata>,
}

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Internal(anyhow::anyhow!("writing {}: {e}", path.display()))
}

impl DataWriter {
    pub fn create(path: &Path, layout: Layout, format: FileFormat) -> Result<Self> {
        let file = File::create(path).map_err(|e| io(path, e))?;
        Ok(match format {
            FileFormat::Jsonl => DataWriter::Jsonl { out: BufWriter::with_capacity(1 << 20, file), layout },
            FileFormat::Parquet => {
                let schema = schema(layout);
                let props = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .set_max_row_group_row_count(Some(ROW_GROUP))
                    .build();
                let out = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| io(path, e))?;
                DataWriter::Parquet { out, layout, schema }
            }
        })
    }

    /// Writes conversations, each with its row's metadata (`metadata[i]` for `rows[i]`).
    pub fn write_conversations(
        &mut self,
        rows: &[Conversation],
        metadata: &[Option<RowMetadata>],
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        match self {
            DataWriter::Jsonl { out, layout } => {
                for (row, &metadata) in rows.iter().zip(metadata) {
                    match layout {
                        Layout::Messages => serde_json::to_writer(
                            &mut *out,
                            &OpenAiRow {
                                id: &row.id,
                                messages: &row.turns,
                                tools: row.tools.as_ref(),
                                metadata,
                            },
                        ),
                        _ => serde_json::to_writer(
                            &mut *out,
                            &SpecForgeRow {
                                id: &row.id,
                                conversations: &row.turns,
                                tools: row.tools.as_ref(),
                                metadata,
                            },
                        ),
                    }
                    .map_err(|e| Error::Internal(e.into()))?;
                    out.write_all(b"\n").map_err(|e| Error::Internal(e.into()))?;
                }
                Ok(())
            }
            DataWriter::Parquet { out, schema, .. } => {
                let batch = conversation_batch(schema.clone(), rows, metadata)?;
                out.write(&batch).map_err(|e| Error::Internal(e.into()))
            }
        }
    }

    /// Writes tokenized rows, each with its row's metadata (`metadata[i]` for `rows[i]`).
    pub fn write_tokenized(&mut self, rows: &[Tokenized], metadata: &[Option<RowMetadata>]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        match self {
            DataWriter::Jsonl { out, .. } => {
                for (row, &metadata) in rows.iter().zip(metadata) {
                    let record = TokenizedRow {
                        id: &row.id,
                        input_ids: &row.input_ids,
                        loss_mask: &row.loss_mask,
                        metadata,
                    };
                    serde_json::to_writer(&mut *out, &record).map_err(|e| Error::Internal(e.into()))?;
                    out.write_all(b"\n").map_err(|e| Error::Internal(e.into()))?;
                }
                Ok(())
            }
            DataWriter::Parquet { out, schema, .. } => {
                let batch = tokenized_batch(schema.clone(), rows, metadata)?;
                out.write(&batch).map_err(|e| Error::Internal(e.into()))
            }
        }
    }

    pub fn finish(self) -> Result<()> {
        match self {
            DataWriter::Jsonl { mut out, .. } => {
                out.flush().map_err(|e| Error::Internal(e.into()))?;
                out.into_inner()
                    .map_err(|e| Error::Internal(anyhow::anyhow!("{e}")))?
                    .sync_all()
                    .map_err(|e| Error::Internal(e.into()))
            }
            DataWriter::Parquet { out, layout: _, .. } => {
                let file = out.into_inner().map_err(|e| Error::Internal(e.into()))?;
                file.sync_all().map_err(|e| Error::Internal(e.into()))
            }
        }
    }
}

fn turn_fields() -> Fields {
    Fields::from(vec![
        Field::new("role", DataType::Utf8, false),
        Field::new("content", DataType::Utf8, false),
        Field::new("reasoning_content", DataType::Utf8, true),
        // JSON text, as SpecForge stores list and dict fields so Arrow sees one type.
        Field::new("tool_calls", DataType::Utf8, true),
        Field::new("tool_call_id", DataType::Utf8, true),
    ])
}

fn turn_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Struct(turn_fields()), false))
}

/// The metadata columns every layout ends with (null where nothing was measured).
fn metadata_fields() -> [Field; 2] {
    [
        Field::new("acceptance_length", DataType::Float64, true),
        Field::new("verify_steps", DataType::Int32, true),
    ]
}

fn metadata_columns(metadata: &[Option<RowMetadata>]) -> [ArrayRef; 2] {
    let lengths: Float64Array = metadata.iter().map(|m| m.map(|m| m.acceptance_length)).collect();
    let steps: Int32Array =
        metadata.iter().map(|m| m.map(|m| m.verify_steps.min(i32::MAX as u32) as i32)).collect();
    [Arc::new(lengths), Arc::new(steps)]
}

fn schema(layout: Layout) -> SchemaRef {
    let id = Field::new("id", DataType::Utf8, false);
    let [acceptance, steps] = metadata_fields();
    Arc::new(match layout {
        Layout::Conversations | Layout::Messages => {
            let name = if layout == Layout::Messages { "messages" } else { "conversations" };
            Schema::new(vec![
                id,
                Field::new(name, DataType::List(turn_item()), false),
                // The functions offered, as JSON text; null without.
                Field::new("tools", DataType::Utf8, true),
                acceptance,
                steps,
            ])
        }
        Layout::Tokenized => Schema::new(vec![
            id,
            Field::new(
                "input_ids",
                DataType::List(Arc::new(Field::new("item", DataType::Int32, false))),
                false,
            ),
            Field::new(
                "loss_mask",
                DataType::List(Arc::new(Field::new("item", DataType::Int8, false))),
                false,
            ),
            acceptance,
            steps,
        ]),
    })
}

fn conversation_batch(
    schema: SchemaRef,
    rows: &[Conversation],
    metadata: &[Option<RowMetadata>],
) -> Result<RecordBatch> {
    let mut ids = StringBuilder::new();
    let mut tools = StringBuilder::new();
    let mut turns =
        ListBuilder::new(StructBuilder::from_fields(turn_fields(), rows.len() * 3)).with_field(turn_item());
    for row in rows {
        ids.append_value(&row.id);
        tools.append_option(row.tools.as_ref().map(|t| t.to_string()));
        let structs = turns.values();
        for turn in &row.turns {
            structs.field_builder::<StringBuilder>(0).expect("role").append_value(&turn.role);
            structs.field_builder::<StringBuilder>(1).expect("content").append_value(&turn.content);
            structs
                .field_builder::<StringBuilder>(2)
                .expect("reasoning_content")
                .append_option(turn.reasoning_content.as_deref());
            let calls = (!turn.tool_calls.is_empty())
                .then(|| serde_json::to_string(&turn.tool_calls))
                .transpose()
                .map_err(|e| Error::Internal(e.into()))?;
            structs.field_builder::<StringBuilder>(3).expect("tool_calls").append_option(calls);
            structs
                .field_builder::<StringBuilder>(4)
                .expect("tool_call_id")
                .append_option(turn.tool_call_id.as_deref());
            structs.append(true);
        }
        turns.append(true);
    }
    let [acceptance, steps] = metadata_columns(metadata);
    let columns: Vec<ArrayRef> =
        vec![Arc::new(ids.finish()), Arc::new(turns.finish()), Arc::new(tools.finish()), acceptance, steps];
    RecordBatch::try_new(schema, columns).map_err(|e| Error::Internal(e.into()))
}

fn tokenized_batch(
    schema: SchemaRef,
    rows: &[Tokenized],
    metadata: &[Option<RowMetadata>],
) -> Result<RecordBatch> {
    let mut ids = StringBuilder::new();
    let mut input_ids = ListBuilder::new(Int32Builder::new()).with_field(Arc::new(Field::new(
        "item",
        DataType::Int32,
        false,
    )));
    let mut loss_mask =
        ListBuilder::new(Int8Builder::new()).with_field(Arc::new(Field::new("item", DataType::Int8, false)));
    for row in rows {
        ids.append_value(&row.id);
        input_ids.values().append_slice(&row.input_ids.iter().map(|&t| t as i32).collect::<Vec<_>>());
        input_ids.append(true);
        loss_mask.values().append_slice(&row.loss_mask.iter().map(|&m| m as i8).collect::<Vec<_>>());
        loss_mask.append(true);
    }
    let [acceptance, steps] = metadata_columns(metadata);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ids.finish()),
        Arc::new(input_ids.finish()),
        Arc::new(loss_mask.finish()),
        acceptance,
        steps,
    ];
    RecordBatch::try_new(schema, columns).map_err(|e| Error::Internal(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, ListArray, StringArray, StructArray};
    use domain::conversation::ToolCall;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use serde_json::json;

    fn tool_conversation() -> Conversation {
        let turn = |role: &str, content: &str| Turn {
            role: role.into(),
            content: content.into(),
            ..Turn::default()
        };
        Conversation {
            id: "1-a".into(),
            thinking: None,
            turns: vec![
                turn("user", "weather?"),
                Turn {
                    tool_calls: vec![ToolCall::new("c1", "get_weather", "{\"city\": \"Paris\"}")],
                    ..turn("assistant", "")
                },
                Turn { tool_call_id: Some("c1".into()), ..turn("tool", "18 C") },
                turn("assistant", "18 C."),
            ],
            tools: Some(json!([{"type": "function", "function": {"name": "get_weather"}}])),
        }
    }

    fn write(layout: Layout, format: FileFormat) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let mut writer = DataWriter::create(&path, layout, format).unwrap();
        writer.write_conversations(&[tool_conversation()], &[None]).unwrap();
        writer.finish().unwrap();
        (dir, path)
    }

    #[test]
    fn jsonl_rows_carry_tools_calls_and_results() {
        for (layout, key) in [(Layout::Conversations, "conversations"), (Layout::Messages, "messages")] {
            let (_dir, path) = write(layout, FileFormat::Jsonl);
            let row: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            assert_eq!(row["tools"][0]["function"]["name"], "get_weather");
            let call = &row[key][1]["tool_calls"][0];
            assert_eq!(
                (call["id"].as_str(), call["type"].as_str(), call["function"]["arguments"].as_str()),
                (Some("c1"), Some("function"), Some("{\"city\": \"Paris\"}"))
            );
            assert_eq!(row[key][2]["tool_call_id"], "c1");
            // Turns without calls carry no empty fields.
            assert!(row[key][3].get("tool_calls").is_none());
        }
    }

    #[test]
    fn parquet_rows_carry_tools_and_calls_as_json_text() {
        let (_dir, path) = write(Layout::Messages, FileFormat::Parquet);
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap().build().unwrap();
        let batch = reader.into_iter().next().unwrap().unwrap();
        let tools =
            batch.column_by_name("tools").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
        assert!(tools.value(0).contains("get_weather"));
        let messages =
            batch.column_by_name("messages").unwrap().as_any().downcast_ref::<ListArray>().unwrap().clone();
        let turns = messages.value(0);
        let turns = turns.as_any().downcast_ref::<StructArray>().unwrap();
        let calls =
            turns.column_by_name("tool_calls").unwrap().as_any().downcast_ref::<StringArray>().unwrap();
        let parsed: Vec<ToolCall> = serde_json::from_str(calls.value(1)).unwrap();
        assert_eq!(parsed[0].function.name, "get_weather");
        assert!(calls.is_null(0));
        let ids =
            turns.column_by_name("tool_call_id").unwrap().as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(ids.value(2), "c1");
    }
}
