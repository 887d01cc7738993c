//! Page-wide keyboard shortcuts that stay quiet while the user types.

use leptos::prelude::*;

/// Calls `handler` with the key of every keydown that is not typed into a field and carries no
/// Ctrl/Alt/Meta. Returns whether the handler used the key (then its default is prevented).
/// The listener is removed with the component.
pub fn on_shortcut(handler: impl Fn(&str) -> bool + 'static) {
    let handle = window_event_listener(leptos::ev::keydown, move |ev| {
        if ev.ctrl_key() || ev.alt_key() || ev.meta_key() || typing(&ev) {
            return;
        }
        if handler(&ev.key()) {
            ev.prevent_default();
        }
    });
    on_cleanup(move || handle.remove());
}

/// True when the key goes into a text field, a select or an editable element.
fn typing(ev: &web_sys::KeyboardEvent) -> bool {
    use wasm_bindgen::JsCast;
    let Some(element) = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()) else {
        return false;
    };
    match element.tag_name().to_ascii_lowercase().as_str() {
        "textarea" | "select" => true,
        "input" => {
            let kind = element.get_attribute("type").unwrap_or_default().to_ascii_lowercase();
            !matches!(kind.as_str(), "checkbox" | "radio" | "button" | "submit")
        }
        _ => element.get_attribute("contenteditable").is_some_and(|v| v != "false"),
    }
}
