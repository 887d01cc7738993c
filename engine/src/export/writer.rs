//! Data files: JSONL or Parquet rows of one layout. Rows are written in the order given (the
//! plan's id order) and no file holds a timestamp, so the same export gives the same bytes.

use super::conversation::Conversation;
use super::tokenize::Tokenized;
use crate::generation::conversation::Turn;
use crate::{Error, Result};
use arrow_array::builder::{
    ArrayBuilder, Int32Builder, Int8Builder, ListBuilder, StringBuilder, StructBuilder,
};
use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use domain::conversation::ToolCall;
use domain::export::{FileFormat, Layout};
use domain::trainer::ToolsColumn;
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
    Jsonl { out: BufWriter<File>, layout: Layout, tools: ToolsColumn },
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

/// How a row's tools are written, by `ToolsColumn`.
fn tools_of(column: ToolsColumn, tools: Option<&serde_json::Value>) -> Option<Tools<'_>> {
    match column {
        ToolsColumn::ListWhenOffered => tools.map(Tools::List),
        ToolsColumn::TextWhenOffered => tools.map(|t| Tools::Text(t.to_string())),
        ToolsColumn::TextOnEveryRow => {
            Some(Tools::Text(tools.map_or_else(|| "[]".to_string(), |t| t.to_string())))
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum Tools<'a> {
    List(&'a serde_json::Value),
    Text(String),
}

#[derive(Serialize)]
struct SpecForgeRow<'a> {
    id: &'a str,
    conversations: &'a [Turn],
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<RowMetadata>,
}

#[derive(Serialize)]
struct OpenAiRow<'a> {
    id: &'a str,
    messages: &'a [Turn],
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
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
    /// A data file of `layout` rows; `tools` says how JSONL conversation rows carry their tools
    /// (Parquet rows always as JSON text, null without).
    pub fn create(path: &Path, layout: Layout, format: FileFormat, tools: ToolsColumn) -> Result<Self> {
        let file = File::create(path).map_err(|e| io(path, e))?;
        Ok(match format {
            FileFormat::Jsonl => {
                DataWriter::Jsonl { out: BufWriter::with_capacity(1 << 20, file), layout, tools }
            }
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
            DataWriter::Jsonl { out, layout, tools } => {
                for (row, &metadata) in rows.iter().zip(metadata) {
                    match layout {
                        Layout::Messages => serde_json::to_writer(
                            &mut *out,
                            &OpenAiRow {
                                id: &row.id,
                                messages: &row.turns,
                                tools: tools_of(*tools, row.tools.as_ref()),
                                metadata,
                            },
                        ),
                        _ => serde_json::to_writer(
                            &mut *out,
                            &SpecForgeRow {
                                id: &row.id,
                                conversations: &row.turns,
                                tools: tools_of(*tools, row.tools.as_ref()),
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
        // OpenAI's call shape as structures (`datasets` reads them back as lists of dicts, which
        // a renderer takes as they are); the arguments stay JSON text, as the API writes them.
        Field::new("tool_calls", DataType::List(call_item()), true),
        Field::new("tool_call_id", DataType::Utf8, true),
    ])
}

/// `{"id", "type", "function": {"name", "arguments"}}`.
fn call_fields() -> Fields {
    let function = Fields::from(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("arguments", DataType::Utf8, false),
    ]);
    Fields::from(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("function", DataType::Struct(function), false),
    ])
}

fn call_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Struct(call_fields()), false))
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
            let calls = structs.field_builder::<CallsBuilder>(3).expect("tool_calls");
            append_calls(calls, &turn.tool_calls);
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

/// What `StructBuilder::from_fields` makes for a list field.
type CallsBuilder = ListBuilder<Box<dyn ArrayBuilder>>;

/// A turn's calls; null (not an empty list) for a turn without, as JSONL leaves the key out.
fn append_calls(calls: &mut CallsBuilder, turn_calls: &[ToolCall]) {
    if turn_calls.is_empty() {
        calls.append(false);
        return;
    }
    let call = calls.values().as_any_mut().downcast_mut::<StructBuilder>().expect("a call is a struct");
    for c in turn_calls {
        call.field_builder::<StringBuilder>(0).expect("id").append_value(&c.id);
        call.field_builder::<StringBuilder>(1).expect("type").append_value("function");
        let function = call.field_builder::<StructBuilder>(2).expect("function");
        function.field_builder::<StringBuilder>(0).expect("name").append_value(&c.function.name);
        function.field_builder::<StringBuilder>(1).expect("arguments").append_value(&c.function.arguments);
        function.append(true);
        call.append(true);
    }
    calls.append(true);
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
        let mut writer = DataWriter::create(&path, layout, format, ToolsColumn::ListWhenOffered).unwrap();
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
    fn trainer_rows_carry_tools_as_json_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let mut writer =
            DataWriter::create(&path, Layout::Conversations, FileFormat::Jsonl, ToolsColumn::TextOnEveryRow)
                .unwrap();
        let plain = Conversation { id: "1-b".into(), tools: None, ..tool_conversation() };
        writer.write_conversations(&[tool_conversation(), plain.clone()], &[None, None]).unwrap();
        writer.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let offered: serde_json::Value = serde_json::from_str(rows[0]["tools"].as_str().unwrap()).unwrap();
        assert_eq!(offered, tool_conversation().tools.unwrap());
        assert_eq!(rows[1]["tools"], "[]");
        // speculators: text where a row offers tools, nothing where it offers none.
        let mut writer =
            DataWriter::create(&path, Layout::Conversations, FileFormat::Jsonl, ToolsColumn::TextWhenOffered)
                .unwrap();
        writer.write_conversations(&[tool_conversation(), plain], &[None, None]).unwrap();
        writer.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(rows[0]["tools"].is_string());
        assert!(rows[1].get("tools").is_none());
    }

    #[test]
    fn parquet_rows_carry_calls_as_structures_and_tools_as_json_text() {
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
        let calls = turns.column_by_name("tool_calls").unwrap().as_any().downcast_ref::<ListArray>().unwrap();
        assert!(calls.is_null(0));
        let made = calls.value(1);
        let made = made.as_any().downcast_ref::<StructArray>().unwrap();
        let text = |array: &StructArray, name: &str, i: usize| {
            array
                .column_by_name(name)
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(i)
                .to_string()
        };
        let function =
            made.column_by_name("function").unwrap().as_any().downcast_ref::<StructArray>().unwrap();
        assert_eq!(
            (
                text(made, "id", 0),
                text(made, "type", 0),
                text(function, "name", 0),
                text(function, "arguments", 0)
            ),
            ("c1".into(), "function".into(), "get_weather".into(), "{\"city\": \"Paris\"}".into())
        );
        let ids =
            turns.column_by_name("tool_call_id").unwrap().as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(ids.value(2), "c1");
    }
}
