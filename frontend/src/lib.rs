//! The browser entry point: hydrates the server-rendered page. Nothing else lives here.

// The whole app's view types are laid out here (as in `app`, whose limit this matches).
#![recursion_limit = "256"]

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
