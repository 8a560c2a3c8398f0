//! Each dialect's part of a replay run: the `Replay` implementation of
//! `engine_client::dialect::Vllm` (through vLLM's translation layer and its
//! stop detection) and of `engine_client::dialect::Tokenspeed`.

pub mod tokenspeed;
mod vllm;
