//! TokenSpeed 0.1.1's msgpack dialect: ADD as `TokenizedGenerateReqInput`,
//! ABORT as a plain array of rids, and `BatchTokenIDOutSlim` batches split
//! into rows ([`BatchRow`]).
//!
//! Wire facts relied on (docs/tokenspeed-wire.md §2, §5, §7;
//! docs/runner/tokenspeed.md "TokenSpeed"; TokenSpeed 0.1.1
//! `tokenspeed/runtime/engine/zmq_msgpack.py`):
//!
//! - input is `[identity, type, payload]` with `00` ADD
//!   (`TokenizedGenerateReqInput`) and `01` ABORT (a plain array of rids);
//!   there are no utility calls;
//! - output is `[BatchTokenIDOutSlim, aux...]` (aux ignored: the slim batch
//!   has no tensors) or the one frame `ENGINE_CORE_DEAD`; a batch is
//!   columnar, one row per rid with delta ids and cumulative counts; a row
//!   whose finish string is not empty is terminal;
//! - a ragged batch (a column whose length differs from `rids`) is refused
//!   whole; the gateway counts it and goes on (the requests in flight are
//!   not failed, docs/runner/tokenspeed.md "Gateway side").
//!
//! Batches are read as the typed `BatchTokenIDOutSlim` by the direct decoder
//! (`engine_protocol::hot::tokenspeed::decode_batch`) and split into rows by
//! `into_rows` (`engine_protocol::typed::tokenspeed`).

use bytes::Bytes;
use engine_protocol::hot::tokenspeed::decode_batch;
use engine_protocol::typed::tokenspeed::{self as ts, BatchRow};
use engine_protocol::{encode_message, Limits, MessageKind, ReleaseSchema, Value};

use super::{BatchInfo, Demux, EngineWire, WireError};

/// TokenSpeed 0.1.1's msgpack dialect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokenspeed;

/// The TokenSpeed release the runner speaks (its mock, its gateway).
pub fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::TokenSpeed, "0.1.1")
        .expect("the TokenSpeed 0.1.1 table is built in")
}

impl EngineWire for Tokenspeed {
    type Request = Value;
    type Step = BatchRow;
    const NAME: &'static str = "tokenspeed";
    const UTILITIES: bool = false;
    const BAD_BATCH_FAILS_REQUESTS: bool = false;
    const REQUEST_NAME: &'static str = "TokenizedGenerateReqInput";

    fn request_id(req: &Value) -> Option<&str> {
        match req {
            Value::Struct(s) => s.str_field("rid"),
            _ => None,
        }
    }

    fn encode_add(release: &'static ReleaseSchema, req: &Value) -> Result<Vec<Vec<u8>>, WireError> {
        encode_message(release, MessageKind::EngineCoreRequest, req)
            .map_err(|source| WireError::Encode { what: "TokenizedGenerateReqInput", source })
    }

    fn encode_abort(_release: &'static ReleaseSchema, ids: &[String]) -> Result<Vec<Vec<u8>>, WireError> {
        Ok(ts::encode_abort(ids))
    }

    fn decode_batch(
        release: &'static ReleaseSchema,
        frames: Vec<Bytes>,
        limits: &Limits,
        demux: &mut impl Demux<BatchRow>,
    ) -> Result<BatchInfo, WireError> {
        let Some(first) = frames.first() else { return Ok(BatchInfo::default()) };
        // Aux frames are ignored: the slim batch has no tensors.
        let (batch, drift) = decode_batch(release, &[first.as_ref()], limits).map_err(WireError::Decode)?;
        let rows = batch.into_rows().map_err(|e| WireError::Decode(e.into()))?;
        for mut row in rows {
            narrow_tokens(&mut row);
            let rid = row.rid.clone();
            demux.offer(&rid, row.finish.is_terminal(), move || row);
        }
        Ok(BatchInfo { drift, ..Default::default() })
    }

    fn step_tokens(step: &BatchRow) -> &[i64] {
        row_tokens(step)
    }
}

/// A row's token ids as the gateway side keeps them. The wire allows ids up
/// to 2^64-1 (docs/wire-protocol.md §6.4); no vocabulary has one above
/// `i64::MAX`, so the decoder keeps such an id as `i64::MAX`, itself
/// no tokenizer's id, and every row a gateway hands on holds `i64`s.
pub fn row_tokens(row: &BatchRow) -> &[i64] {
    row.output_ids.as_i64().unwrap_or(&[])
}

/// Narrows a decoded row's token ids to `i64` (see [`row_tokens`]).
fn narrow_tokens(row: &mut BatchRow) {
    if row.output_ids.as_i64().is_none() {
        row.output_ids = row.output_ids.iter().map(|t| i64::try_from(t).unwrap_or(i64::MAX)).collect();
    }
}
