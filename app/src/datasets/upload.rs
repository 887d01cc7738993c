//! Sends a file to `POST /api/datasets/upload` with upload progress (XMLHttpRequest: `fetch`
//! reports no upload progress).

use domain::dataset::Uploaded;

/// Uploads `file`; `on_progress` gets the fraction sent, `on_done` the stored upload or a message.
#[cfg(feature = "hydrate")]
pub fn send(
    file: web_sys::File,
    on_progress: impl Fn(f64) + 'static,
    on_done: impl FnOnce(Result<Uploaded, String>) + 'static,
) {
    use wasm_bindgen::{closure::Closure, JsCast};
    let start = || -> Result<web_sys::XmlHttpRequest, wasm_bindgen::JsValue> {
        let xhr = web_sys::XmlHttpRequest::new()?;
        xhr.open_with_async("POST", "/api/datasets/upload", true)?;
        let form = web_sys::FormData::new()?;
        form.append_with_blob_and_filename("file", &file, &file.name())?;
        let progress = Closure::<dyn FnMut(web_sys::ProgressEvent)>::new(move |e: web_sys::ProgressEvent| {
            if e.length_computable() && e.total() > 0.0 {
                on_progress(e.loaded() / e.total());
            }
        });
        xhr.upload()?.set_onprogress(Some(progress.as_ref().unchecked_ref()));
        progress.forget();
        let done = xhr.clone();
        let on_end = Closure::once_into_js(move |_: web_sys::Event| {
            let status = done.status().unwrap_or(0);
            let text = done.response_text().ok().flatten().unwrap_or_default();
            on_done(interpret(status, &text));
        });
        xhr.set_onloadend(Some(on_end.unchecked_ref()));
        xhr.send_with_opt_form_data(Some(&form))?;
        Ok(xhr)
    };
    if let Err(e) = start() {
        leptos::logging::error!("starting the upload failed: {e:?}");
    }
}

#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
fn interpret(status: u16, body: &str) -> Result<Uploaded, String> {
    match status {
        0 => Err("the upload failed: the connection to the server was lost".into()),
        200 => serde_json::from_str(body).map_err(|e| format!("the server's answer was not understood: {e}")),
        _ => Err(serde_json::from_str::<crate::AppError>(body)
            .map(|e| e.to_string())
            .unwrap_or_else(|_| format!("the upload failed ({status})"))),
    }
}
