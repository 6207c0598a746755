//! # scalevfs-commute: the scalability checker
//!
//! (Documentation of the method follows in a later commit.)

#![warn(missing_docs)]

pub mod catalogue;
pub mod cli;
pub mod exec;
pub mod report;
pub mod symbol;
pub mod trace;
pub mod world;

use catalogue::{Case, Form};

/// A selected case in one form.
#[derive(Clone, Debug)]
pub struct Selected {
    /// Index into the catalogue.
    pub index: usize,
    /// The form.
    pub form: Form,
    /// `name@form`.
    pub id: String,
}

/// The case and form of an id `name@form`.
pub fn find<'a>(cases: &'a [Case], id: &str) -> Option<(&'a Case, Form)> {
    let (name, form) = id.rsplit_once('@')?;
    let form = Form::ALL.into_iter().find(|f| f.name() == form)?;
    cases.iter().find(|c| c.name == name).map(|c| (c, form))
}
