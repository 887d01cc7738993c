use leptos::prelude::*;
use time::{format_description::well_known::Rfc3339, macros::format_description, OffsetDateTime};

/// "3 min ago" with the exact UTC time on hover.
#[component]
pub fn RelativeTime(at: OffsetDateTime) -> impl IntoView {
    let exact = exact_utc(at);
    let machine = at.format(&Rfc3339).unwrap_or_default();
    view! { <time datetime=machine title=exact>{relative(at, OffsetDateTime::now_utc())}</time> }
}

pub fn exact_utc(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC"))
        .unwrap_or_default()
}

pub fn relative(at: OffsetDateTime, now: OffsetDateTime) -> String {
    let secs = (now - at).whole_seconds();
    let (n, unit) = match secs.abs() {
        s if s < 45 => return "just now".into(),
        s if s < 3600 => ((s + 30) / 60, "min"),
        s if s < 86_400 => ((s + 1800) / 3600, "h"),
        s => ((s + 43_200) / 86_400, "d"),
    };
    if secs >= 0 {
        format!("{n} {unit} ago")
    } else {
        format!("in {n} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::relative;
    use time::{Duration, OffsetDateTime};

    #[test]
    fn rounds_to_the_nearest_unit() {
        let now = OffsetDateTime::now_utc();
        assert_eq!(relative(now - Duration::seconds(10), now), "just now");
        assert_eq!(relative(now - Duration::seconds(150), now), "3 min ago");
        assert_eq!(relative(now - Duration::hours(5), now), "5 h ago");
        assert_eq!(relative(now - Duration::days(3), now), "3 d ago");
        assert_eq!(relative(now + Duration::minutes(10), now), "in 10 min");
    }
}
