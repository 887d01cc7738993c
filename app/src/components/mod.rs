pub mod layout;
pub mod time;
