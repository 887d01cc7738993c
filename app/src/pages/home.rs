use domain::{access::SECTIONS, Viewer};
use leptos::prelude::*;
use leptos_meta::Title;

/// The landing page: the workflow in order, with the steps this user's role can take.
#[component]
pub fn HomePage() -> impl IntoView {
    let viewer = use_context::<Viewer>();
    let role = viewer.as_ref().map(|v| v.role);
    let steps = [
        ("/datasets", "Pick source datasets", "Import ShareGPT, OpenAI, Alpaca or prompt-column files."),
        ("/endpoints", "Register vLLM servers", "Add the servers that run the target model."),
        ("/runs", "Launch a generation run", "Send every prompt through the target model; watch it live."),
        ("/review", "Review samples", "Read traces, approve or reject, flag what is broken."),
        ("/exports", "Export the training set", "Write the curated EAGLE-3 set to training storage."),
    ];
    let items = steps
        .into_iter()
        .filter(|(href, _, _)| {
            SECTIONS.iter().any(|(p, _, needed)| p == href && role.is_some_and(|r| r.allows(*needed)))
        })
        .map(|(href, title, text)| {
            view! {
                <li>
                    <a href=href>{title}</a>
                    <span class="muted">{text}</span>
                </li>
            }
        })
        .collect_view();
    view! {
        <Title text="Overview"/>
        <h1>"Overview"</h1>
        <ol class="steps">{items}</ol>
    }
}
