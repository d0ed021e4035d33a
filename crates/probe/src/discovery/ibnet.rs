//! The whole InfiniBand fabric from one host: `ibnetdiscover`'s text read by
//! [`results::ibnet`], the one reader of it (the plan importer reads it there too).

pub use results::ibnet::{links as parse, normalize_guid, split_width_speed};
