//! The SSE decoder and response assemblers: any bytes, split into chunks
//! at fuzzer-chosen points, for both protocols, must give a response or an
//! error, never a panic.
#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use cadre::config::ProviderKind;
use cadre::provider::decode_stream;
use libfuzzer_sys::fuzz_target;

/// Polls a future that never waits (the stream is in memory) to its end.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    let kind = if split & 1 == 0 {
        ProviderKind::Anthropic
    } else {
        ProviderKind::Openai
    };
    let size = usize::from(split >> 1).max(1);
    let chunks: Vec<Result<Vec<u8>, String>> =
        body.chunks(size).map(|c| Ok(c.to_vec())).collect();
    let stream = futures_util::stream::iter(chunks);
    let _ = block_on(decode_stream(kind, stream, &|_| {}));
});
