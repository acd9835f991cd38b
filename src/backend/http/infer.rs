//! Inference over HTTP with Triton's binary tensor data extension: one
//! `POST /v2/models/M[/versions/V]/infer` per request.
//!
//! The request body is a JSON header (tensor names, datatypes, shapes, and for each
//! input `binary_data_size`, or the shared memory parameters of an input placed in a
//! region) immediately followed by the raw bytes of each input in the header's order;
//! the `Inference-Header-Content-Length` header gives the JSON's length. Outputs are
//! asked for with `binary_data: true` (or the shared memory parameters of where the
//! server is to write them). The answer is the same shape: a JSON header, then each
//! binary output's bytes in the order listed. It is translated into a
//! `ModelInferResponse` whose `raw_output_contents` are slices of the answer's body
//! (an empty entry for an output written into shared memory), so that the answer is
//! checked and decoded as gRPC's is. No tensor is ever written as JSON numbers.

use bytes::Bytes;
use http::Method;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use super::HttpClient;
use crate::backend::proto::infer_parameter::ParameterChoice;
use crate::backend::proto::model_infer_response::InferOutputTensor;
use crate::backend::proto::{InferParameter, ModelInferResponse};
use crate::backend::request::InferRequest;
use crate::backend::transport::MAX_MESSAGE_BYTES;
use crate::error::{AnswerTo, Error, Result};

/// One `POST …/infer` per request on a server's HTTP connections (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct HttpTransport {
    client: HttpClient,
}

impl HttpTransport {
    /// The transport of `client`'s server.
    pub(crate) fn new(client: HttpClient) -> HttpTransport {
        HttpTransport { client }
    }

    /// The client whose connections it uses.
    pub(crate) fn client(&self) -> &HttpClient {
        &self.client
    }

    /// Sends `request` and waits for its answer (the contract of `transport.rs`).
    pub(crate) async fn send(&self, request: InferRequest) -> Result<ModelInferResponse> {
        let model = request.model();
        let (body, json_len) = encode(&request)?;
        let path = format!(
            "{}/infer",
            super::model_path(model, &request.binding().version)
        );
        let answer = self
            .client
            .call(Method::POST, &path, Some((body, Some(json_len))))
            .await?;
        if !answer.status.is_success() {
            return Err(self
                .client
                .status_error(answer.status, &answer.body, Some(model)));
        }
        let json_len = answer
            .headers
            .get("inference-header-content-length")
            .map(|v| v.to_str().ok().and_then(|s| s.trim().parse::<usize>().ok()));
        decode(answer.body, json_len, model).map_err(|message| Error::InvalidAnswer {
            url: self.client.peer.url.clone(),
            answer: AnswerTo::Inference {
                model: model.into(),
            },
            message,
        })
    }
}

/// A parameter's value as JSON.
#[derive(Serialize)]
#[serde(untagged)]
enum Value<'a> {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(&'a str),
}

impl<'a> From<&'a InferParameter> for Value<'a> {
    fn from(p: &'a InferParameter) -> Self {
        match &p.parameter_choice {
            Some(ParameterChoice::BoolParam(b)) => Value::Bool(*b),
            Some(ParameterChoice::Int64Param(i)) => Value::Int(*i),
            Some(ParameterChoice::Uint64Param(u)) => Value::Uint(*u),
            Some(ParameterChoice::DoubleParam(d)) => Value::Double(*d),
            Some(ParameterChoice::StringParam(s)) => Value::Str(s),
            None => Value::Str(""),
        }
    }
}

/// A `parameters` object.
#[derive(Default)]
struct Parameters<'a>(Vec<(&'a str, Value<'a>)>);

impl Parameters<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Parameters<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct RequestHeader<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    id: &'a str,
    #[serde(skip_serializing_if = "Parameters::is_empty")]
    parameters: Parameters<'a>,
    inputs: Vec<InputHeader<'a>>,
    outputs: Vec<OutputHeader<'a>>,
}

#[derive(Serialize)]
struct InputHeader<'a> {
    name: &'a str,
    shape: &'a [i64],
    datatype: &'a str,
    parameters: Parameters<'a>,
}

#[derive(Serialize)]
struct OutputHeader<'a> {
    name: &'a str,
    parameters: Parameters<'a>,
}

/// The request body and the length of its JSON header. Inputs in shared memory carry
/// their region's parameters and no bytes; the others `binary_data_size` and their
/// bytes after the header, in the same order.
fn encode(request: &InferRequest) -> Result<(Vec<u8>, usize)> {
    let inputs = request.input_tensors();
    let outputs = request.output_tensors();
    let in_shm = request.shm_inputs().is_some();
    let header = RequestHeader {
        id: request.id(),
        parameters: Parameters(
            request
                .parameters()
                .iter()
                .map(|(k, v)| (k.as_str(), Value::from(v)))
                .collect(),
        ),
        inputs: inputs
            .iter()
            .zip(request.input_lens())
            .map(|(t, len)| {
                let mut parameters: Vec<_> = t
                    .parameters
                    .iter()
                    .map(|(k, v)| (k.as_str(), Value::from(v)))
                    .collect();
                if !in_shm {
                    parameters.push(("binary_data_size", Value::Uint(len as u64)));
                }
                InputHeader {
                    name: &t.name,
                    shape: &t.shape,
                    datatype: &t.datatype,
                    parameters: Parameters(parameters),
                }
            })
            .collect(),
        outputs: outputs
            .iter()
            .map(|o| {
                let parameters = if o.parameters.is_empty() {
                    vec![("binary_data", Value::Bool(true))]
                } else {
                    o.parameters
                        .iter()
                        .map(|(k, v)| (k.as_str(), Value::from(v)))
                        .collect()
                };
                OutputHeader {
                    name: &o.name,
                    parameters: Parameters(parameters),
                }
            })
            .collect(),
    };
    let contents = if in_shm { 0 } else { request.contents_len() };
    let mut body = Vec::with_capacity(512 + contents);
    serde_json::to_writer(&mut body, &header)
        .map_err(|e| Error::Internal(format!("inference request header: {e}")))?;
    let json_len = body.len();
    if !in_shm {
        request.write_contents(&mut body);
    }
    if body.len() > MAX_MESSAGE_BYTES {
        return Err(Error::Config(format!(
            "an inference request of {} bytes exceeds the limit of {MAX_MESSAGE_BYTES}",
            body.len()
        )));
    }
    Ok((body, json_len))
}

#[derive(Deserialize)]
struct ResponseHeader {
    #[serde(default)]
    model_name: String,
    #[serde(default)]
    model_version: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    outputs: Vec<OutputMeta>,
}

#[derive(Deserialize)]
struct OutputMeta {
    name: String,
    #[serde(default)]
    datatype: String,
    #[serde(default)]
    shape: Vec<i64>,
    #[serde(default)]
    parameters: OutputParameters,
}

#[derive(Default, Deserialize)]
struct OutputParameters {
    binary_data_size: Option<u64>,
}

/// The answer `body` (its JSON header `json_len` bytes long, when the header says;
/// `Some(None)`: a header that is not a number) as a `ModelInferResponse`; an
/// answer that cannot be read is the reason why.
fn decode(
    body: Bytes,
    json_len: Option<Option<usize>>,
    model: &str,
) -> std::result::Result<ModelInferResponse, String> {
    let json_len = match json_len {
        None => body.len(),
        Some(Some(n)) if n <= body.len() => n,
        Some(_) => {
            return Err(format!(
                "Inference-Header-Content-Length is not a length within the {} bytes of the answer",
                body.len()
            ))
        }
    };
    let header: ResponseHeader = serde_json::from_slice(&body[..json_len])
        .map_err(|e| format!("the answer's JSON header: {e}"))?;
    let mut at = json_len;
    let mut raw = Vec::with_capacity(header.outputs.len());
    let mut outputs = Vec::with_capacity(header.outputs.len());
    for o in header.outputs {
        let size = o.parameters.binary_data_size.unwrap_or(0) as usize;
        if size > body.len() - at {
            return Err(format!(
                "output {:?} of model {model:?} announces {size} bytes, but {} are left",
                o.name,
                body.len() - at
            ));
        }
        raw.push(body.slice(at..at + size));
        at += size;
        outputs.push(InferOutputTensor {
            name: o.name,
            datatype: o.datatype,
            shape: o.shape,
            ..Default::default()
        });
    }
    Ok(ModelInferResponse {
        model_name: header.model_name,
        model_version: header.model_version,
        id: header.id,
        outputs,
        raw_output_contents: raw,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_binary_outputs_are_sliced_in_order() {
        let json = br#"{"model_name":"null","model_version":"1","outputs":[
            {"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},
            {"name":"b","datatype":"FP32","shape":[1,1],"parameters":{"binary_data_size":4}}]}"#;
        let mut body = json.to_vec();
        body.extend((0u8..12).collect::<Vec<_>>());
        let r = decode(Bytes::from(body.clone()), Some(Some(json.len())), "null").unwrap();
        assert_eq!(r.model_name, "null");
        assert_eq!(r.outputs[1].shape, vec![1, 1]);
        assert_eq!(&r.raw_output_contents[0][..], &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(&r.raw_output_contents[1][..], &[8, 9, 10, 11]);
        body.truncate(body.len() - 1);
        let e = decode(Bytes::from(body), Some(Some(json.len())), "null").unwrap_err();
        assert!(e.contains("announces 4 bytes, but 3 are left"), "{e}");
        let e = decode(Bytes::from_static(b"{}"), Some(None), "null").unwrap_err();
        assert!(e.contains("Inference-Header-Content-Length"), "{e}");
    }

    #[test]
    fn outputs_in_shared_memory_have_empty_entries() {
        let json = br#"{"outputs":[{"name":"a","datatype":"FP32","shape":[1,2],
            "parameters":{"shared_memory_region":"r","shared_memory_byte_size":8}}]}"#;
        let r = decode(Bytes::from_static(json), None, "m").unwrap();
        assert_eq!(r.raw_output_contents, vec![Bytes::new()]);
    }
}
