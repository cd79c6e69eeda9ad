//! Feeds arbitrary bytes to the wire decoder, as a peer would send them:
//! length-delimited frames (with the server's size limit), each decoded as
//! every message type a controller, an agent or a client receives. It must
//! never panic nor allocate past the frame, and whatever decodes must
//! encode back to the same bytes.
#![no_main]

use formats::wire::{self, Auth, FromAgent, Hello, Request, Response, ToAgent, Welcome};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

fn roundtrip<M: DeserializeOwned + Serialize>(frame: &[u8]) {
    if let Ok(msg) = wire::decode::<M>(frame) {
        let again = wire::encode(&msg).expect("a decoded message encodes");
        assert_eq!(again, frame, "decode then encode changed the bytes");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut codec = LengthDelimitedCodec::builder()
        .max_frame_length(wire::MAX_FRAME)
        .new_codec();
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = codec.decode(&mut buf) {
        roundtrip::<Hello>(&frame);
        roundtrip::<Auth>(&frame);
        roundtrip::<Welcome>(&frame);
        roundtrip::<FromAgent>(&frame);
        roundtrip::<ToAgent>(&frame);
        roundtrip::<Request>(&frame);
        roundtrip::<Response>(&frame);
    }
});
