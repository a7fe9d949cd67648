//! SSE decoding: one Anthropic stream whose text arrives as a single
//! `text_delta` event of 1, 8 or 64 MB, fed in 16 KiB chunks as a network
//! would deliver it. The decoder looks at each byte once, so the time per
//! byte stays flat as the event grows (the decoder it replaced re-scanned
//! its buffer for every chunk: quadratic in the event's size). Reported as
//! throughput, so the three sizes compare directly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre::config::ProviderKind;
use cadre::provider::{StreamLimits, decode_stream_within};
use divan::counter::BytesCount;
use serde_json::json;

const CHUNK: usize = 16 * 1024;

fn main() {
    divan::main();
}

/// A whole Anthropic stream with one text delta of `size` bytes.
fn stream_bytes(size: usize) -> Vec<u8> {
    let text = "a".repeat(size);
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let mut out = Vec::new();
    for (name, data) in events {
        out.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    }
    out
}

#[divan::bench(args = [1, 8, 64], sample_count = 5, sample_size = 1)]
fn one_large_event(bencher: divan::Bencher, megabytes: usize) {
    let bytes = stream_bytes(megabytes * 1_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let limits = StreamLimits::unlimited();
    bencher
        .counter(BytesCount::new(bytes.len()))
        .bench_local(|| {
            let chunks = bytes.chunks(CHUNK).map(Ok::<_, std::convert::Infallible>);
            let stream = futures_util::stream::iter(chunks);
            let response = rt
                .block_on(decode_stream_within(
                    ProviderKind::Anthropic,
                    &limits,
                    stream,
                    &|_| {},
                ))
                .unwrap();
            divan::black_box(response);
        });
}
