//! The review pages: the filtered sample list (`/review`), one sample (`/review/samples/:id`)
//! and queue mode (`/review/queue`). The list's filter lives in the URL query, so a view can be
//! shared as a link and the back button returns to the previous filter.

pub mod api;
mod format;
mod keys;
pub mod list;
pub mod queue;
pub mod sample;
mod training;

use domain::review::SampleFilter;
use leptos_router::params::ParamsMap;
use std::collections::BTreeMap;

/// The filter in a URL query (the `after` page key is not part of it).
pub fn filter_from(query: &ParamsMap) -> Result<SampleFilter, String> {
    let pairs: BTreeMap<String, String> =
        query.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    SampleFilter::from_query(&pairs)
}

/// `?a=b&…` for a filter plus extra pairs (empty when there is nothing to say).
pub fn query_string(filter: &SampleFilter, extra: &[(&'static str, String)]) -> String {
    let map: ParamsMap = filter.to_query().into_iter().chain(extra.iter().cloned()).collect();
    map.to_query_string()
}
