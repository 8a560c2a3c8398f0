//! What every dialect's tables share: the field constructor and the plain
//! types (`int`, `float`, `bool`, `str`, `Any`, their optionals and lists).

use super::{Default as D, Field, Ty};

/// A field of a table.
pub(crate) const fn f(name: &'static str, ty: &'static Ty, default: D) -> Field {
    Field { name, ty, default }
}

pub(crate) static INT: Ty = Ty::Int;
pub(crate) static FLOAT: Ty = Ty::Float;
pub(crate) static BOOL: Ty = Ty::Bool;
pub(crate) static STR: Ty = Ty::Str;
pub(crate) static ANY: Ty = Ty::Any;
pub(crate) static OPT_INT: Ty = Ty::Optional(&INT);
pub(crate) static OPT_FLOAT: Ty = Ty::Optional(&FLOAT);
pub(crate) static OPT_BOOL: Ty = Ty::Optional(&BOOL);
pub(crate) static OPT_STR: Ty = Ty::Optional(&STR);
pub(crate) static LIST_INT: Ty = Ty::List(&INT);
pub(crate) static LIST_STR: Ty = Ty::List(&STR);
