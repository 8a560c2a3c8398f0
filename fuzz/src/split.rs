//! The frame convention of the multi-frame targets: how one fuzz input
//! becomes a ZeroMQ multipart message (`engine_testkit::split`, documented
//! there; shared with the stable seed tests of `engine-protocol`).

pub use engine_testkit::split::*;
