//! `strftime_now(format)` at a fixed date, midnight, as CPython's `datetime.strftime` formats it
//! on Linux (glibc, C locale). transformers stamps the current date; the exporter stamps the
//! date it is given, so an export renders the same text whenever it runs, and the manifest says
//! which date that was.

use time::{Date, Month, Weekday};

/// Formats the fixed date; the error names a directive this does not implement, so a template
/// needing it is refused rather than rendered with a guess.
pub fn format(date: Date, format: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut directive = chars.next().ok_or("strftime_now: the format ends with a lone %")?;
        // glibc's `-` flag: no padding (`%-d` is "3", not "03").
        let unpadded = directive == '-';
        if unpadded {
            directive = chars.next().ok_or("strftime_now: the format ends with %-")?;
        }
        let number = |n: i64, width: usize, pad: char| -> String {
            if unpadded {
                n.to_string()
            } else {
                let s = n.to_string();
                format!("{}{s}", pad.to_string().repeat(width.saturating_sub(s.len())))
            }
        };
        let weekday = date.weekday();
        let yday = date.ordinal() as i64 - 1;
        let piece = match directive {
            'a' => weekday_name(weekday)[..3].to_string(),
            'A' => weekday_name(weekday).to_string(),
            'b' | 'h' => month_name(date.month())[..3].to_string(),
            'B' => month_name(date.month()).to_string(),
            'c' => format!(
                "{} {} {:>2} 00:00:00 {}",
                &weekday_name(weekday)[..3],
                &month_name(date.month())[..3],
                date.day(),
                date.year()
            ),
            'C' => number(date.year() as i64 / 100, 2, '0'),
            'd' => number(date.day() as i64, 2, '0'),
            'D' | 'x' => format!("{:02}/{:02}/{:02}", date.month() as u8, date.day(), date.year() % 100),
            'e' => number(date.day() as i64, 2, ' '),
            'F' => format!("{}-{:02}-{:02}", date.year(), date.month() as u8, date.day()),
            'G' => date.to_iso_week_date().0.to_string(),
            'g' => number(date.to_iso_week_date().0 as i64 % 100, 2, '0'),
            'H' | 'M' | 'S' => number(0, 2, '0'),
            'I' | 'l' => number(12, 2, if directive == 'I' { '0' } else { ' ' }),
            'k' => number(0, 2, ' '),
            'j' => number(yday + 1, 3, '0'),
            'm' => number(date.month() as i64, 2, '0'),
            'n' => "\n".into(),
            't' => "\t".into(),
            'p' => "AM".into(),
            'P' => "am".into(),
            'r' => "12:00:00 AM".into(),
            'R' => "00:00".into(),
            'T' | 'X' => "00:00:00".into(),
            'f' => "000000".into(),
            'u' => weekday.number_from_monday().to_string(),
            'w' => weekday.number_days_from_sunday().to_string(),
            'U' => number((yday + 7 - weekday.number_days_from_sunday() as i64) / 7, 2, '0'),
            'W' => number((yday + 7 - weekday.number_days_from_monday() as i64) / 7, 2, '0'),
            'V' => number(date.to_iso_week_date().1 as i64, 2, '0'),
            'y' => number(date.year() as i64 % 100, 2, '0'),
            'Y' => date.year().to_string(),
            // A naive datetime (as `datetime.now()` returns) has no zone: both print nothing.
            'z' | 'Z' => String::new(),
            '%' => "%".into(),
            other => return Err(format!("strftime_now: the directive %{other} is not supported")),
        };
        out.push_str(&piece);
    }
    Ok(out)
}

fn weekday_name(day: Weekday) -> &'static str {
    match day {
        Weekday::Monday => "Monday",
        Weekday::Tuesday => "Tuesday",
        Weekday::Wednesday => "Wednesday",
        Weekday::Thursday => "Thursday",
        Weekday::Friday => "Friday",
        Weekday::Saturday => "Saturday",
        Weekday::Sunday => "Sunday",
    }
}

fn month_name(month: Month) -> &'static str {
    match month {
        Month::January => "January",
        Month::February => "February",
        Month::March => "March",
        Month::April => "April",
        Month::May => "May",
        Month::June => "June",
        Month::July => "July",
        Month::August => "August",
        Month::September => "September",
        Month::October => "October",
        Month::November => "November",
        Month::December => "December",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn formats_like_python_on_linux() {
        let d = date!(2026 - 02 - 03);
        assert_eq!(format(d, "%d %b %Y").unwrap(), "03 Feb 2026");
        assert_eq!(format(d, "%Y-%m-%d").unwrap(), "2026-02-03");
        assert_eq!(format(d, "%A, %B %-d, %Y").unwrap(), "Tuesday, February 3, 2026");
        // Checked against CPython 3.11: datetime(2026, 2, 3).strftime(...).
        assert_eq!(
            format(d, "%a %j %U %W %w %y %H:%M:%S %p %% %e").unwrap(),
            "Tue 034 05 05 2 26 00:00:00 AM %  3"
        );
        assert!(format(d, "%Q").unwrap_err().contains("%Q"));
    }
}
