//! `draft-studio run …` and `draft-studio export …`: each returns the exit code to end with.

use super::{exit, progress, ApiClient, ClientError};
use crate::cli::{AcceptanceCommand, ApiArgs, ExportCommand, RunCommand, RunStart, WaitArgs};
use serde_json::{json, Map, Value};
use std::time::Duration;

pub enum Client {
    Run(RunCommand),
    Export(ExportCommand),
    Acceptance(AcceptanceCommand),
}

/// Runs one client command; prints results on stdout and failures on stderr.
pub async fn run(command: Client) -> u8 {
    let result = match command {
        Client::Run(command) => run_command(command).await,
        Client::Export(command) => export_command(command).await,
        Client::Acceptance(command) => acceptance_command(command).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", e.message);
            e.code
        }
    }
}

fn client(api: &ApiArgs) -> Result<ApiClient, ClientError> {
    ApiClient::new(&api.url, &api.token)
}

/// A query string, each value escaped.
fn query(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

fn bad_input(message: impl Into<String>) -> ClientError {
    ClientError::new(exit::BAD_INPUT, message)
}

fn interval(wait: &WaitArgs) -> Duration {
    Duration::from_secs_f64(wait.interval.clamp(0.05, 600.0))
}

async fn run_command(command: RunCommand) -> Result<u8, ClientError> {
    match command {
        RunCommand::Start(start) => {
            let api = client(&start.api)?;
            let body = start_body(&start)?;
            let created: Value = api.post("/runs", &body).await?;
            let id = created["id"]
                .as_i64()
                .ok_or_else(|| ClientError::new(exit::ERROR, "no run id in the answer"))?;
            if !start.wait.wait {
                println!("{id}");
                return Ok(exit::COMPLETED);
            }
            eprintln!("run {id} started");
            wait_for_run(&api, id, &start.wait).await
        }
        RunCommand::Status { id, json, api } => {
            let snapshot: Value = client(&api)?.get(&format!("/runs/{id}")).await?;
            if json {
                println!("{snapshot:#}");
            } else {
                println!("{}", run_summary(id, &snapshot));
            }
            Ok(exit::COMPLETED)
        }
        RunCommand::Pause { id, api } => control(&api, id, "pause").await,
        RunCommand::Resume { id, api } => control(&api, id, "resume").await,
        RunCommand::Cancel { id, api } => control(&api, id, "cancel").await,
        RunCommand::Retry { id, api, wait } => {
            let api = client(&api)?;
            let done: Value = api.post(&format!("/runs/{id}/retry"), &json!({})).await?;
            println!("run {id}: {} sample(s) queued again", done["requeued"]);
            if wait.wait {
                wait_for_run(&api, id, &wait).await
            } else {
                Ok(exit::COMPLETED)
            }
        }
    }
}

async fn control(api: &ApiArgs, id: i64, action: &str) -> Result<u8, ClientError> {
    let done: Value = client(api)?.post(&format!("/runs/{id}/{action}"), &json!({})).await?;
    println!("run {id} is {}", done["status"].as_str().unwrap_or("?"));
    Ok(exit::COMPLETED)
}

/// The settings file, then the flags, as the form's fields.
fn start_body(start: &RunStart) -> Result<Value, ClientError> {
    let mut body = match &start.settings {
        None => Map::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| bad_input(format!("cannot read the settings file {}: {e}", path.display())))?;
            match serde_json::from_str(&text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    return Err(bad_input(format!(
                        "{} must hold a JSON object of run fields",
                        path.display()
                    )))
                }
                Err(e) => return Err(bad_input(format!("{} is not valid JSON: {e}", path.display()))),
            }
        }
    };
    if let Some(v) = &start.name {
        body.insert("name".into(), json!(v));
    }
    if let Some(v) = start.dataset {
        body.insert("dataset_id".into(), json!(v));
    }
    if !start.endpoints.is_empty() {
        body.insert("endpoint_ids".into(), json!(start.endpoints));
    }
    if let Some(v) = &start.model {
        body.insert("model".into(), json!(v));
    }
    if let Some(v) = start.max_tokens {
        body.insert("max_tokens".into(), json!(v));
    }
    if let Some(v) = start.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(draft) = &start.draft {
        let (name, revision) = draft.split_once('@').unwrap_or((draft, ""));
        if name.trim().is_empty() {
            return Err(bad_input(format!("--draft takes NAME or NAME@REVISION, not `{draft}`")));
        }
        body.insert("draft_name".into(), json!(name.trim()));
        body.insert("draft_revision".into(), json!(revision.trim()));
    }
    if let Some(export) = start.trained_on {
        body.insert("draft_trained_on".into(), json!(export));
    }
    let mut from_source = false;
    if let Some(run) = start.from_run {
        body.insert("selection".into(), json!("run"));
        body.insert("source_run_id".into(), json!(run));
        from_source = true;
    }
    if let Some(export) = start.from_export {
        body.insert("selection".into(), json!("export"));
        body.insert("source_export_id".into(), json!(export));
        body.insert("source_split".into(), json!(start.split.as_deref().unwrap_or("validation")));
        from_source = true;
    }
    // Prompts sent again keep their thinking modes unless the file or a flag says otherwise.
    if from_source && !body.contains_key("thinking") {
        body.insert("thinking".into(), json!("as_source"));
    }
    for field in &start.fields {
        let Some((key, value)) = field.split_once('=') else {
            return Err(bad_input(format!("--set takes KEY=VALUE, not `{field}`")));
        };
        body.insert(key.trim().into(), json!(value));
    }
    Ok(Value::Object(body))
}

fn count(snapshot: &Value, key: &str) -> u64 {
    snapshot["counts"][key].as_u64().unwrap_or(0)
}

fn run_summary(id: i64, snapshot: &Value) -> String {
    let (done, total) = progress::done_total(snapshot);
    format!(
        "run {id} {}: {done} of {total} finished (ok {}, truncated {}, empty {}, timed_out {}, failed {}), {:.0} tok/s",
        snapshot["status"].as_str().unwrap_or("?"),
        count(snapshot, "ok"),
        count(snapshot, "truncated"),
        count(snapshot, "empty"),
        count(snapshot, "timed_out"),
        count(snapshot, "failed"),
        snapshot["client_tokens_per_s"].as_f64().unwrap_or(0.0),
    )
}

/// Polls the run until it is completed or cancelled. A paused run is waited for: outages pause
/// runs and they resume on their own.
async fn wait_for_run(api: &ApiClient, id: i64, wait: &WaitArgs) -> Result<u8, ClientError> {
    let bar = progress::RunProgress::new();
    loop {
        let snapshot: Value = api.get(&format!("/runs/{id}")).await?;
        bar.update(&snapshot);
        let code = match snapshot["status"].as_str() {
            Some("completed") => {
                let succeeded =
                    count(&snapshot, "ok") + count(&snapshot, "truncated") + count(&snapshot, "empty");
                let failed = count(&snapshot, "failed") + count(&snapshot, "timed_out");
                Some(if succeeded == 0 && failed > 0 { exit::FAILED } else { exit::COMPLETED })
            }
            Some("cancelled") => Some(exit::CANCELLED),
            _ => None,
        };
        if let Some(code) = code {
            bar.finish();
            println!("{}", run_summary(id, &snapshot));
            return Ok(code);
        }
        tokio::time::sleep(interval(wait)).await;
    }
}

async fn acceptance_command(command: AcceptanceCommand) -> Result<u8, ClientError> {
    match command {
        AcceptanceCommand::Show { run, json, api } => {
            let report: Value = client(&api)?.get(&format!("/runs/{run}/acceptance")).await?;
            if json {
                println!("{report:#}");
            } else {
                print!("{}", super::acceptance::report_text(&report));
            }
            Ok(exit::COMPLETED)
        }
        AcceptanceCommand::Register { draft, trained_on, api } => {
            let Some(draft) = domain::lineage::parse_draft(&draft) else {
                return Err(bad_input(format!("give the draft as NAME or NAME@REVISION, not `{draft}`")));
            };
            let body = json!({ "name": draft.name, "revision": draft.revision, "trained_on": trained_on });
            let _: Value = client(&api)?.post("/drafts", &body).await?;
            match trained_on {
                Some(export) => println!("{} trained on export {export}", draft.describe()),
                None => println!("{} registered", draft.describe()),
            }
            Ok(exit::COMPLETED)
        }
        AcceptanceCommand::Drafts { name, json, api } => {
            let path = match &name {
                Some(name) => format!("/drafts?{}", query(&[("name", name.as_str())])),
                None => "/drafts".to_string(),
            };
            let drafts: Value = client(&api)?.get(&path).await?;
            if json {
                println!("{drafts:#}");
            } else {
                print!("{}", super::acceptance::drafts_text(&drafts));
            }
            Ok(exit::COMPLETED)
        }
        AcceptanceCommand::Loop { draft, dataset, json, api } => {
            let dataset = dataset.map(|d| d.to_string());
            let mut pairs = vec![("draft", draft.as_str())];
            pairs.extend(dataset.as_deref().map(|d| ("dataset", d)));
            let path = format!("/acceptance/loop?{}", query(&pairs));
            let table: Value = client(&api)?.get(&path).await?;
            if json {
                println!("{table:#}");
            } else {
                print!("{}", super::acceptance::loop_text(&table));
            }
            Ok(exit::COMPLETED)
        }
        AcceptanceCommand::Compare { a, b, json, api } => {
            let comparison: Value = client(&api)?.get(&format!("/acceptance/compare?a={a}&b={b}")).await?;
            if json {
                println!("{comparison:#}");
            } else {
                print!("{}", super::acceptance::comparison_text(&comparison));
            }
            Ok(exit::COMPLETED)
        }
    }
}

async fn export_command(command: ExportCommand) -> Result<u8, ClientError> {
    match command {
        ExportCommand::Start { preset, spec, api, wait } => {
            let api = client(&api)?;
            let body = match (preset, spec) {
                (Some(name), None) => json!({ "preset": name }),
                (None, Some(path)) => {
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        bad_input(format!("cannot read the spec file {}: {e}", path.display()))
                    })?;
                    let spec: Value = serde_json::from_str(&text)
                        .map_err(|e| bad_input(format!("{} is not valid JSON: {e}", path.display())))?;
                    json!({ "spec": spec })
                }
                _ => return Err(bad_input("pass --preset NAME or --spec FILE")),
            };
            let created: Value = api.post("/exports", &body).await?;
            let id = created["id"]
                .as_i64()
                .ok_or_else(|| ClientError::new(exit::ERROR, "no export id in the answer"))?;
            if !wait.wait {
                println!("{id}");
                return Ok(exit::COMPLETED);
            }
            eprintln!("export {id} started");
            wait_for_export(&api, id, &wait).await
        }
        ExportCommand::Status { id, api } => {
            let export: Value = client(&api)?.get(&format!("/exports/{id}")).await?;
            println!("{}", export_summary(id, &export));
            Ok(exit::COMPLETED)
        }
        ExportCommand::Download { id, out, api } => download(&client(&api)?, id, &out).await,
    }
}

fn export_summary(id: i64, export: &Value) -> String {
    let mut line = format!(
        "export {id} {}: {} of {} rows",
        export["status"].as_str().unwrap_or("?"),
        export["rows_done"],
        export["rows_total"].as_i64().map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
    );
    if let Some(location) = export["location"].as_str() {
        line.push_str(&format!(" at {location}"));
    }
    if let Some(error) = export["error"].as_str() {
        line.push_str(&format!(": {error}"));
    }
    line
}

async fn wait_for_export(api: &ApiClient, id: i64, wait: &WaitArgs) -> Result<u8, ClientError> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} rows  ETA {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    loop {
        let export: Value = api.get(&format!("/exports/{id}")).await?;
        bar.set_length(export["rows_total"].as_u64().unwrap_or(0));
        bar.set_position(export["rows_done"].as_u64().unwrap_or(0));
        let code = match export["status"].as_str() {
            Some("completed") => Some(exit::COMPLETED),
            Some("failed") => Some(exit::FAILED),
            Some("cancelled") => Some(exit::CANCELLED),
            _ => None,
        };
        if let Some(code) = code {
            bar.finish_and_clear();
            println!("{}", export_summary(id, &export));
            return Ok(code);
        }
        tokio::time::sleep(interval(wait)).await;
    }
}

/// Writes each file beside its final name and renames it, so `out` never holds a partial file.
async fn download(api: &ApiClient, id: i64, out: &std::path::Path) -> Result<u8, ClientError> {
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let listed: Value = api.get(&format!("/exports/{id}/files")).await?;
    let files: Vec<String> = listed["files"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    if files.is_empty() {
        return Err(bad_input(format!("export {id} has no files yet; wait until it is completed")));
    }
    let local = |e: std::io::Error, what: String| ClientError::new(exit::ERROR, format!("{what}: {e}"));
    tokio::fs::create_dir_all(out).await.map_err(|e| local(e, format!("cannot create {}", out.display())))?;
    for name in files {
        // Names come from the server's manifest; refuse any that would leave `out`.
        if name.contains(['/', '\\']) || name.starts_with('.') {
            return Err(ClientError::new(
                exit::ERROR,
                format!("the server listed an unsafe file name {name:?}"),
            ));
        }
        let target = out.join(&name);
        let partial = out.join(format!(".{name}.partial"));
        let response = api.get_raw(&format!("/exports/{id}/files/{name}")).await?;
        let mut file = tokio::fs::File::create(&partial)
            .await
            .map_err(|e| local(e, format!("cannot write {}", partial.display())))?;
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                ClientError::new(exit::UNAVAILABLE, format!("the download of {name} broke off: {e}"))
            })?;
            file.write_all(&chunk)
                .await
                .map_err(|e| local(e, format!("cannot write {}", partial.display())))?;
        }
        file.sync_all().await.map_err(|e| local(e, format!("cannot write {}", partial.display())))?;
        tokio::fs::rename(&partial, &target)
            .await
            .map_err(|e| local(e, format!("cannot move the file to {}", target.display())))?;
        println!("{}", target.display());
    }
    Ok(exit::COMPLETED)
}
