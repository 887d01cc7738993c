pub mod fields;
pub mod interval;
pub mod layout;
pub mod time;
