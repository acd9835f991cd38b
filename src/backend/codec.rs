//! The `ModelInfer` codec: requests written by hand into tonic's send buffer, responses
//! decoded by prost.
//!
//! tonic's generated client encodes with prost, which needs the whole message built
//! first: one `Vec<u8>` per input tensor, then every byte copied again into the send
//! buffer. [`InferCodec`] instead reserves the message's exact length once and writes
//! the tensors from the features straight into that buffer
//! ([`InferRequest::encode`]). The response side keeps prost: raw outputs are `Bytes`
//! sliced from the receive buffer (see `build.rs`), with nothing left to save.

use std::marker::PhantomData;

use bytes::BufMut;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic::Status;
use tonic_prost::ProstDecoder;

use super::proto::ModelInferResponse;
use super::request::InferRequest;

/// [`Codec`] of a call that sends [`InferRequest`]s and decodes `D` with prost:
/// `ModelInferResponse` for `ModelInfer` ([`InferCodec`]), `ModelStreamInferResponse`
/// for `ModelStreamInfer` (the same requests on a stream).
#[derive(Debug)]
pub struct InferCodecOf<D>(PhantomData<fn() -> D>);

impl<D> Default for InferCodecOf<D> {
    fn default() -> Self {
        InferCodecOf(PhantomData)
    }
}

/// [`Codec`] of `ModelInfer`: [`InferRequest`] out, `ModelInferResponse` in.
pub type InferCodec = InferCodecOf<ModelInferResponse>;

impl<D> Codec for InferCodecOf<D>
where
    D: prost::Message + Default + Send + 'static,
{
    type Encode = InferRequest;
    type Decode = D;
    type Encoder = InferEncoder;
    type Decoder = ProstDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        InferEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::default()
    }
}

/// Writes an [`InferRequest`] into the send buffer in one pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct InferEncoder;

impl Encoder for InferEncoder {
    type Item = InferRequest;
    type Error = Status;

    fn encode(&mut self, item: InferRequest, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let len = item.encoded_len();
        // One allocation for the whole message instead of growth by doubling.
        buf.reserve(len);
        // BytesMut counts room left as `usize::MAX - len`: the difference is what
        // was written.
        let before = buf.remaining_mut();
        item.encode(buf);
        debug_assert_eq!(before - buf.remaining_mut(), len, "encoded length");
        Ok(())
    }
}
