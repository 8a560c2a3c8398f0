//! Decoder limits: hostile lengths, deep nesting, frame counts and sizes.
//! Every case must be a typed rejection, never a panic, a stack overflow or
//! an allocation sized by the declared length.

mod common;

use common::*;
use engine_protocol::decode::{decode_payload, Limits};
use engine_protocol::schema::Ty;
use engine_protocol::{decode_message, MessageKind, RejectClass};

static ANY: Ty = Ty::Any;

#[test]
fn array32_declaring_four_billion_elements_is_malformed_without_allocating() {
    let p = [0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0];
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Malformed);
}

#[test]
fn map32_declaring_four_billion_entries_is_malformed() {
    let p = [0xdf, 0xff, 0xff, 0xff, 0xff];
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Malformed);
}

#[test]
fn str32_longer_than_the_input_is_malformed() {
    let p = [0xdb, 0x7f, 0xff, 0xff, 0xff, b'a'];
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Malformed);
}

#[test]
fn nesting_deeper_than_the_limit_is_a_limits_error_not_a_stack_overflow() {
    // 100 000 nested one-element arrays.
    let mut p = vec![0x91; 100_000];
    p.push(0xc0);
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
}

#[test]
fn nesting_inside_extra_args_is_bounded_too() {
    // A request whose sampling_params.extra_args nests 200 maps deep.
    let mut sp = vec![0xde, 0x00, 0x01];
    sp.extend_from_slice(b"\xaaextra_args");
    for _ in 0..200 {
        sp.extend_from_slice(&[0x81, 0xa1, b'k']);
    }
    sp.push(0xc0);
    let mut p = vec![0x99, 0xa1, b'r', 0x90, 0xc0];
    p.extend_from_slice(&sp);
    p.extend_from_slice(&[0xc0, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xc0, 0xc0, 0xc0]);
    let e = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0], p]).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
    assert!(e.path.starts_with("EngineCoreRequest.sampling_params.extra_args.k.k"), "{e}");
}

#[test]
fn too_many_frames_is_a_limits_error() {
    let limits = Limits { max_frames: 4, ..Limits::default() };
    let frames: Vec<&[u8]> = vec![&[0x90]; 5];
    let e = decode_payload("X", &ANY, &frames, &limits).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
}

#[test]
fn oversized_frame_is_a_limits_error() {
    let limits = Limits { max_frame_bytes: 16, ..Limits::default() };
    let big = vec![0u8; 17];
    let e = decode_payload("X", &ANY, &[&[0xc0], &big], &limits).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
}

#[test]
fn tensor_shape_product_overflow_is_a_frames_error() {
    // LogprobsLists ids with shape [2^62, 2^62] and 4 bytes of data.
    let frames = golden_frames("0.33.0", "output/logprobs_inline");
    let p = &frames[0];
    // Find the first shape header `92` after the "<i4" dtype string.
    let at = p.windows(4).position(|w| w == [0xa3, 0x3c, 0x69, 0x34]).unwrap() + 4;
    let mut bad = p[..at].to_vec();
    bad.extend_from_slice(&[0x92, 0xcf, 0x40, 0, 0, 0, 0, 0, 0, 0, 0xcf, 0x40, 0, 0, 0, 0, 0, 0, 0]);
    bad.extend_from_slice(&[0xd6, 0x03, 0, 0, 0, 0]);
    let e = decode_message(v033(), MessageKind::EngineCoreOutputs, &[&bad], &Limits::default()).unwrap_err();
    // Truncated after the tensor, but the tensor check comes first.
    assert_eq!(e.class, RejectClass::Frames, "{e}");
}
