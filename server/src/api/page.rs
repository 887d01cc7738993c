//! Key-set pagination: `?after=<cursor>&limit=<n>`; each page returns `next`, the cursor of the
//! page after it (absent on the last page).

use super::error::ApiError;
use serde::Deserialize;
use utoipa::IntoParams;

pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 500;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// The `next` cursor of the previous page.
    pub after: Option<String>,
    /// Items per page, 1 to 500 (default 50).
    pub limit: Option<usize>,
}

impl PageQuery {
    pub fn limit(&self) -> Result<usize, ApiError> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            Some(n) => Err(ApiError::invalid(format!("limit must be 1 to {MAX_LIMIT}, not {n}"))),
        }
    }

    /// A page of `items` (of any order) by descending id: newest first, stable under inserts.
    /// Used for the small tables (runs, datasets, endpoints, exports), which the engine lists
    /// whole; samples are paged by the engine's own cursor.
    pub fn by_id<T>(
        &self,
        mut items: Vec<T>,
        id: impl Fn(&T) -> i64,
    ) -> Result<(Vec<T>, Option<String>), ApiError> {
        let limit = self.limit()?;
        let after = match self.after.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
            None => None,
            Some(raw) => Some(raw.parse::<i64>().map_err(|_| {
                ApiError::invalid(format!(
                    "`after` must be the `next` value of the previous page, not `{raw}`"
                ))
            })?),
        };
        items.sort_by_key(|item| std::cmp::Reverse(id(item)));
        let mut page: Vec<T> = items.into_iter().filter(|item| after.is_none_or(|a| id(item) < a)).collect();
        let more = page.len() > limit;
        page.truncate(limit);
        let next = if more { page.last().map(|item| id(item).to_string()) } else { None };
        Ok((page, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_every_item_once_newest_first() {
        let items: Vec<i64> = vec![3, 9, 1, 7, 5];
        let mut query = PageQuery { after: None, limit: Some(2) };
        let mut seen = Vec::new();
        loop {
            let (page, next) = query.by_id(items.clone(), |i| *i).unwrap();
            seen.extend(page);
            match next {
                Some(cursor) => query.after = Some(cursor),
                None => break,
            }
        }
        assert_eq!(seen, vec![9, 7, 5, 3, 1]);
    }

    #[test]
    fn a_bad_cursor_or_limit_says_what_to_send() {
        let bad = PageQuery { after: Some("x".into()), limit: None };
        assert!(bad.by_id(vec![1i64], |i| *i).unwrap_err().message.contains("`next`"));
        let big = PageQuery { after: None, limit: Some(10_000) };
        assert!(big.limit().unwrap_err().message.contains("1 to 500"));
    }
}
