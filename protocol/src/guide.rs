//! A gateway's walk through the protocol, end to end, every step a doctest:
//! learn the engine's release from its registration, build a request the
//! engine serves, encode it for that release, send it, read the outputs,
//! abort, and handle errors. What the engine requires at each step is said
//! where it applies, with where the `translate` feature does it for you.
//!
//! Wire facts (docs/wire-protocol.md §2-§4, §6.9, §7, §8): a gateway's
//! ROUTER socket sends `[engine identity, request type, payload, aux...]`
//! to an engine (the identity is the engine index, 2 bytes little-endian);
//! the engine pushes `[payload, aux...]` batches of `EngineCoreOutputs`
//! back on a PULL socket, or the single frame `ENGINE_CORE_DEAD` when it
//! dies. The engine's release comes from its registration (the first
//! message on each input socket); a gateway must encode for it, since
//! releases append fields and 0.34.0 retyped the prompt (an int32 array
//! its decoder requires where older engines took a list of ints).
//!
//! # 1. The engine's release, from its registration
//!
//! [`crate::Registration::read`] takes the registration's bytes and says
//! which release the engine speaks (by its `vllm_version`, or for a build
//! without a table here by the fields it sent); [`crate::EngineCodec`]
//! then encodes and decodes for it, so the same gateway code serves every
//! release the typed API covers. One doctest per release:
//!
//! ```
//! use engine_protocol::typed::{EngineCoreReadyResponse, EngineCoreRequest, Eos};
//! use engine_protocol::{EngineCodec, Registration, ReleaseMatch, VLLM_0_32_0};
//!
//! // What a 0.32.0 engine sends first on the input socket (made here with
//! // the typed API).
//! let registration = EngineCoreReadyResponse { vllm_version: "0.32.0".into(), max_model_len: 2048, ..Default::default() };
//! let payload = registration.encode(VLLM_0_32_0)?.remove(0);
//! let read = Registration::read(&payload)?;
//! assert!(std::ptr::eq(read.release, VLLM_0_32_0));
//! assert_eq!((read.matched, read.ready.max_model_len), (ReleaseMatch::Version, 2048));
//!
//! let codec = EngineCodec::new(read.release)?;
//! let request = EngineCoreRequest::builder("req-1", vec![1_i32, 450], 8, Eos::token(2)).build()?;
//! let frames = codec.encode_request(&request)?;
//! // [ADD, payload]: a 22-element array, the prompt a list of ints.
//! assert_eq!((frames.len(), &frames[1][..3]), (2, &[0xdc, 0x00, 0x16][..]));
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! ```
//! use engine_protocol::typed::{EngineCoreReadyResponse, EngineCoreRequest, Eos};
//! use engine_protocol::{EngineCodec, VLLM_0_33_0};
//!
//! let registration = EngineCoreReadyResponse { vllm_version: "0.33.0".into(), ..Default::default() };
//! let codec = EngineCodec::from_registration(&registration.encode(VLLM_0_33_0)?[0])?;
//! assert_eq!(codec.release().version, "0.33.0");
//! let request = EngineCoreRequest::builder("req-1", vec![1_i32, 450], 8, Eos::token(2)).build()?;
//! let frames = codec.encode_request(&request)?;
//! assert_eq!(&frames[1][..3], &[0xdc, 0x00, 0x16]); // 22 elements, as 0.32.0
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! ```
//! use engine_protocol::typed::{EngineCoreReadyResponse, EngineCoreRequest, Eos};
//! use engine_protocol::{EngineCodec, VLLM_0_34_0};
//!
//! // A 0.34.0 engine's registration (33 keys; here a local build tag).
//! let registration = EngineCoreReadyResponse { vllm_version: "0.34.0+cu129".into(), ..Default::default() };
//! let codec = EngineCodec::from_registration(&registration.encode(VLLM_0_34_0)?[0])?;
//! assert_eq!(codec.release().version, "0.34.0");
//!
//! // The same request code: 23 elements, the prompt the int32 array
//! // `["<i4", [n], data]`, inline up to 63 ids, an aux frame from 64 on
//! // (`VLLM_MSGPACK_ZERO_COPY_THRESHOLD`, 256 bytes), shared with the
//! // request, not copied.
//! let short = EngineCoreRequest::builder("req-1", vec![1_i32, 450], 8, Eos::token(2)).build()?;
//! let frames = codec.encode_request(&short)?;
//! assert_eq!((frames.len(), &frames[1][..3]), (2, &[0xdc, 0x00, 0x17][..]));
//! let long = EngineCoreRequest::builder("req-2", (1..=64).collect::<Vec<i32>>(), 8, Eos::token(2)).build()?;
//! let frames = codec.encode_request(&long)?;
//! assert_eq!((frames.len(), frames[2].len()), (3, 256));
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! A table for any release, typed or not, is also at hand by version
//! ([`crate::release`]), for the value codec and `verify`:
//!
//! ```
//! use engine_protocol::{release, Dialect, UnknownRelease, VLLM_0_33_0};
//!
//! let v033 = release(Dialect::Vllm, "0.33.0")?;
//! assert!(std::ptr::eq(v033, VLLM_0_33_0));
//! // A version without a table is a typed error naming the supported ones.
//! let e: UnknownRelease = release(Dialect::Vllm, "0.21.0").unwrap_err();
//! assert!(e.to_string().contains("0.22.0, 0.22.1, 0.23.0"), "{e}");
//! // Every release from 0.22 on has a table (the value codec and `verify`
//! // take any of them); the typed API covers 0.32.0, 0.33.0 and 0.34.0.
//! assert_eq!(release(Dialect::Vllm, "0.29.0")?.version, "0.29.0");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # 2. A request the engine serves
//!
//! The engine's decoder checks types and its `__post_init__` rules; the
//! engine requires more at run time: a request id (outputs are named by
//! it), a prompt, `max_tokens` (nil decodes, then the engine asserts), the
//! EOS id (without it the request never stops on EOS), a backend for a
//! structured-output constraint (without it a 0.33 engine finishes the
//! request with ERROR), and a prompt no longer than `max_model_len` (the
//! engine does not check and its model runner dies). The builder takes the
//! first ones as arguments and checks the rest:
//!
//! ```
//! use engine_protocol::typed::{Constraint, EngineCoreRequest, Eos, RequestOutputKind};
//!
//! // The EOS facts come from the served model's files: its tokenizer's
//! // `eos_token_id` and `generation_config.json`'s extra ids (with
//! // `translate`, `GatewayTokenizer::from_dir` reads both).
//! let eos = Eos::token(2).with_generation_ids([2, 32000]);
//! let request = EngineCoreRequest::builder("req-1", vec![1_i64, 450, 7483, 310], 64, eos)
//!     .temperature(0.7)
//!     .seed(1234)
//!     .output_kind(RequestOutputKind::Delta)
//!     .max_model_len(4096) // from the engine's registration
//!     .build()?;
//! let sp = request.sampling_params.as_ref().expect("sampling");
//! assert_eq!(sp.eos_token_id, Some(2));
//! assert_eq!(sp.stop_token_ids.as_ref().map(|ids| ids.to_vec()), Some(vec![32000]));
//!
//! // A structured-output constraint only comes with its backend.
//! let json = EngineCoreRequest::builder("req-2", vec![1_i64, 450], 32, Eos::token(2))
//!     .temperature(0.0)
//!     .constraint(Constraint::Regex(r"\d{3}".into()), "xgrammar")
//!     .build()?;
//! assert_eq!(json.serving_problems(Some(4096)), []);
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! With `translate`, `translate::translate` builds these from an
//! OpenAI-style request as vLLM's frontend does (room-based `max_tokens`,
//! `n` fan-out, stop strings to ids, generation-config defaults;
//! docs/translation.md).
//!
//! # 3. Encode and send
//!
//! ```
//! # use engine_protocol::typed::{EngineCoreRequest, Eos};
//! use engine_protocol::{engine_identity, RequestType, VLLM_0_33_0};
//!
//! # let request = EngineCoreRequest::builder("req-1", vec![1_i64, 450], 8, Eos::token(2)).build()?;
//! // The engine's own checks first: nothing it would refuse is written.
//! let frames = request.encode_checked(VLLM_0_33_0)?;
//! assert_eq!(frames[0], [RequestType::Add.byte()]);
//! // On a ROUTER socket, the engine's identity goes in front:
//! let identity = engine_identity(0);
//! let multipart: Vec<&[u8]> = std::iter::once(&identity[..]).chain(frames.iter().map(Vec::as_slice)).collect();
//! assert_eq!(multipart.len(), 3);
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! # 4. Read the outputs
//!
//! The per-token path borrows from the frames (any `AsRef<[u8]>`: a
//! socket library's message frames go in as they are); the rare fields
//! are read by name, typed, and the whole batch converts to the owned
//! typed struct. [`crate::EngineCodec::decode_outputs`] reads a batch of
//! the codec's release the same way; a 0.34.0 batch carries
//! `watermarking` on an output's first batch when the engine watermarks.
//!
//! ```
//! use engine_protocol::typed::{EngineCoreOutput, EngineCoreOutputs, FinishReason};
//! use engine_protocol::{decode_outputs, is_engine_dead, Limits, VLLM_0_33_0};
//!
//! // What an engine pushes (here made with the typed API).
//! let batch = EngineCoreOutputs {
//!     outputs: vec![EngineCoreOutput {
//!         request_id: "req-1".into(),
//!         new_token_ids: vec![1576, 2].into(),
//!         finish_reason: Some(FinishReason::Stop),
//!         ..EngineCoreOutput::default()
//!     }],
//!     ..EngineCoreOutputs::default()
//! };
//! let frames: Vec<Vec<u8>> = batch.encode(VLLM_0_33_0)?;
//!
//! if is_engine_dead(&frames) {
//!     unreachable!("fail every request in flight");
//! }
//! let outputs = decode_outputs(VLLM_0_33_0, &frames, &Limits::default())?;
//! for out in &outputs.outputs {
//!     let tokens: Vec<i64> = out.new_token_ids.iter().collect();
//!     assert_eq!((out.request_id, tokens.as_slice()), ("req-1", &[1576, 2][..]));
//!     assert_eq!(out.finish_reason, Some(FinishReason::Stop));
//!     // 0.33.0's per-request error, typed (none here).
//!     assert_eq!(out.error()?, None);
//! }
//! assert_eq!(outputs.to_owned()?, batch);
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! The engine stops on token ids only. Stop strings are the gateway's to
//! find in the detokenized text, aborting the request when one is found
//! (`translate::RequestStream` does it, as vLLM's frontend).
//!
//! # 5. Abort
//!
//! ```
//! use engine_protocol::typed::encode_abort;
//!
//! // The engine answers nothing for an abort; unknown ids are ignored.
//! let frames = encode_abort(&["req-1"]);
//! assert_eq!(frames[0], [0x01]);
//! ```
//!
//! # 6. Errors
//!
//! Every failure is a typed [`crate::Error`]: a reject class, the path of
//! the offending value, a detail, and for what the engine would fail at
//! run time, the typed [`crate::ServingProblem`]. Decisions go by class
//! and problem, never by text.
//!
//! ```
//! use engine_protocol::typed::{EngineCoreRequest, SamplingParams};
//! use engine_protocol::{decode_message, MessageKind, RejectClass, ServingProblem, Limits, VLLM_0_33_0};
//!
//! // A hand-built request without max_tokens: refused before it is sent.
//! let request = EngineCoreRequest {
//!     request_id: "req-3".into(),
//!     prompt_token_ids: Some(vec![1].into()),
//!     sampling_params: Some(SamplingParams { max_tokens: None, ..SamplingParams::default() }),
//!     ..EngineCoreRequest::default()
//! };
//! let e = request.encode_checked(VLLM_0_33_0).unwrap_err();
//! assert_eq!(e.class, RejectClass::Validation);
//! assert_eq!(e.serving, Some(ServingProblem::NoMaxTokens));
//!
//! // Bytes that are no request: the class and the path where it failed.
//! let e = decode_message(VLLM_0_33_0, MessageKind::EngineCoreRequest, &[&[0x00][..], &[0x93, 0xa1]], &Limits::default())
//!     .unwrap_err();
//! assert_eq!(e.class, RejectClass::Malformed);
//! ```
