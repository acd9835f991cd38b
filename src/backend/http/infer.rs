//! Inference over HTTP: one `POST /v2/models/M[/versions/V]/infer` per request, with
//! Triton's binary tensor data extension when the server lists it, in the protocol's
//! core JSON form otherwise (MLServer, KServe's model server).
//!
//! With binary tensor data:
//! The request body is a JSON header (tensor names, datatypes, shapes, and for each
//! input `binary_data_size`, or the shared memory parameters of an input placed in a
//! region) immediately followed by the raw bytes of each input in the header's order;
//! the `Inference-Header-Content-Length` header gives the JSON's length. Outputs are
//! asked for with `binary_data: true` (or the shared memory parameters of where the
//! server is to write them). The answer is the same shape: a JSON header, then each
//! binary output's bytes in the order listed. It is translated into a
//! `ModelInferResponse` whose `raw_output_contents` are slices of the answer's body
//! (an empty entry for an output written into shared memory), so that the answer is
//! checked and decoded as gRPC's is.
//!
//! In the JSON form, each input carries its values as a flat `data` list of numbers and
//! the answer's outputs are read from theirs (flat or nested, row-major) into the same
//! raw little-endian bytes, so that everything after is the same (a float32 written by
//! the server as the shortest decimal that reads back as it comes back bit for bit).

use bytes::Bytes;
use http::Method;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use super::HttpClient;
use crate::backend::proto::infer_parameter::ParameterChoice;
use crate::backend::proto::model_infer_request::InferInputTensor;
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
        let binary = self.client.binary_tensor_data().await?;
        let (body, json_len) = match request.pairs() {
            Some(_) => (text_body(&request, binary), None),
            None => {
                let (body, json_len) = encode(&request, binary)?;
                (body, binary.then_some(json_len))
            }
        };
        let path = format!("{}/infer", super::model_path(model, request.version()));
        let answer = self
            .client
            .call(Method::POST, &path, Some((body, json_len)))
            .await?;
        self.read(answer, model)
    }
}

/// The JSON body of a text model's request: each BYTES input's elements as JSON
/// strings, or, when they lie in shared memory, its region's parameters and no
/// elements; outputs asked for in binary when the server has binary tensor data (so
/// that answer bytes that are not UTF-8 reach the check that names them).
fn text_body(request: &InferRequest, binary: bool) -> Vec<u8> {
    let pairs = request.pairs().unwrap_or_default();
    let columns: [Vec<&str>; 2] = [
        pairs.iter().map(|p| &*p.0).collect(),
        pairs.iter().map(|p| &*p.1).collect(),
    ];
    let input = |(t, data): (&InferInputTensor, &Vec<&str>)| {
        let mut json = serde_json::json!({
            "name": t.name, "datatype": "BYTES", "shape": t.shape,
        });
        if t.parameters.is_empty() {
            json["data"] = serde_json::json!(data);
        } else {
            let parameters: Parameters<'_> = Parameters(
                t.parameters
                    .iter()
                    .map(|(k, v)| (k.as_str(), Value::from(v)))
                    .collect(),
            );
            json["parameters"] = serde_json::to_value(parameters).expect("JSON serializes");
        }
        json
    };
    let inputs = request.input_tensors();
    let body = serde_json::json!({
        "inputs": inputs.iter().zip(&columns).map(input).collect::<Vec<_>>(),
        "outputs": request.output_tensors().iter().map(|o| serde_json::json!({
            "name": o.name, "parameters": {"binary_data": binary},
        })).collect::<Vec<_>>(),
    });
    serde_json::to_vec(&body).expect("JSON serializes")
}

impl HttpTransport {
    /// An inference answer as a `ModelInferResponse`: an error status by meaning, an
    /// answer that cannot be read as [`Error::InvalidAnswer`].
    fn read(&self, answer: super::Answer, model: &str) -> Result<ModelInferResponse> {
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
            server: self.client.peer.who(),
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
    /// The values as JSON numbers (the JSON form).
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Numbers<'a>>,
}

/// Raw little-endian integers of `size` bytes each, written as a list of numbers.
struct Numbers<'a> {
    size: usize,
    raw: &'a [u8],
}

impl Serialize for Numbers<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.raw.len() / self.size))?;
        for v in self.raw.chunks_exact(self.size) {
            match *v {
                [a, b, c, d] => seq.serialize_element(&i32::from_le_bytes([a, b, c, d]))?,
                _ => {
                    let bytes: [u8; 8] = v.try_into().expect("8-byte integers");
                    seq.serialize_element(&i64::from_le_bytes(bytes))?
                }
            }
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct OutputHeader<'a> {
    name: &'a str,
    parameters: Parameters<'a>,
}

/// The request body and the length of its JSON header. Inputs in shared memory carry
/// their region's parameters and no bytes; the others, with `binary`, carry
/// `binary_data_size` and their bytes after the header, in the same order, and without
/// it their values as JSON numbers (the body is then all JSON).
fn encode(request: &InferRequest, binary: bool) -> Result<(Vec<u8>, usize)> {
    let inputs = request.input_tensors();
    let outputs = request.output_tensors();
    let in_shm = request.shm_inputs().is_some();
    let numbers = !binary && !in_shm;
    let mut raw = Vec::new();
    if numbers {
        request.write_contents(&mut raw);
    }
    let mut at = 0;
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
                if binary && !in_shm {
                    parameters.push(("binary_data_size", Value::Uint(len as u64)));
                }
                let data = numbers.then(|| {
                    at += len;
                    Numbers {
                        size: if t.datatype == "INT32" { 4 } else { 8 },
                        raw: &raw[at - len..at],
                    }
                });
                InputHeader {
                    name: &t.name,
                    shape: &t.shape,
                    datatype: &t.datatype,
                    parameters: Parameters(parameters),
                    data,
                }
            })
            .collect(),
        outputs: outputs
            .iter()
            .map(|o| {
                let parameters = if o.parameters.is_empty() && !binary {
                    Vec::new()
                } else if o.parameters.is_empty() {
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
    if binary && !in_shm {
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
    /// The values as JSON numbers (the JSON form).
    #[serde(default)]
    data: Option<serde_json::Value>,
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
    // An answer all in JSON (no binary part) is read leniently (`null`s as absent).
    let header: ResponseHeader = if json_len == body.len() {
        super::json::read(&body)
    } else {
        serde_json::from_slice(&body[..json_len])
    }
    .map_err(|e| format!("the answer's JSON header: {e}"))?;
    let mut at = json_len;
    let mut raw = Vec::with_capacity(header.outputs.len());
    let mut outputs = Vec::with_capacity(header.outputs.len());
    for o in header.outputs {
        if let Some(data) = &o.data {
            raw.push(Bytes::from(numbers_to_raw(data, &o.datatype).map_err(
                |e| format!("output {:?} of model {model:?}: {e}", o.name),
            )?));
            outputs.push(InferOutputTensor {
                name: o.name,
                datatype: o.datatype,
                shape: o.shape,
                ..Default::default()
            });
            continue;
        }
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

/// A JSON tensor's values (a list, flat or nested, in row-major order) as the raw
/// little-endian bytes of `datatype`.
fn numbers_to_raw(
    data: &serde_json::Value,
    datatype: &str,
) -> std::result::Result<Vec<u8>, String> {
    fn flatten<'v>(v: &'v serde_json::Value, out: &mut Vec<&'v serde_json::Value>) {
        match v {
            serde_json::Value::Array(items) => items.iter().for_each(|i| flatten(i, out)),
            other => out.push(other),
        }
    }
    let mut values = Vec::new();
    flatten(data, &mut values);
    if datatype == "BYTES" {
        // Strings, in the wire form of a BYTES tensor (length-prefixed elements).
        let strings = values
            .iter()
            .map(|v| v.as_str().map(str::as_bytes))
            .collect::<Option<Vec<&[u8]>>>()
            .ok_or("a BYTES element is not a string")?;
        return Ok(crate::backend::bytes::encode(strings));
    }
    let bytes = |v: &serde_json::Value| -> Option<Vec<u8>> {
        Some(match datatype {
            "FP32" => (v.as_f64()? as f32).to_le_bytes().to_vec(),
            "FP16" => half::f16::from_f64(v.as_f64()?).to_le_bytes().to_vec(),
            "FP64" => v.as_f64()?.to_le_bytes().to_vec(),
            "INT64" => v.as_i64()?.to_le_bytes().to_vec(),
            "INT32" => i32::try_from(v.as_i64()?).ok()?.to_le_bytes().to_vec(),
            _ => return None,
        })
    };
    if !matches!(datatype, "FP32" | "FP16" | "FP64" | "INT64" | "INT32") {
        return Err(format!(
            "datatype {datatype:?} in JSON form is not read by bertqa"
        ));
    }
    let mut out = Vec::with_capacity(values.len() * 4);
    for v in values {
        out.extend(bytes(v).ok_or_else(|| format!("{v} is not a value of its datatype"))?);
    }
    Ok(out)
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
    fn json_answers_read_into_the_same_raw_bytes() {
        let values = [0.1f32, -3.4028235e38, 1e-45, 7.0];
        let text: Vec<String> = values.iter().map(|v| format!("{}", *v as f64)).collect();
        let json = format!(
            r#"{{"model_name":"m","id":null,"outputs":[{{"name":"a","datatype":"FP32","shape":[2,2],
            "data":[[{},{}],[{},{}]]}},{{"name":"b","datatype":"INT64","shape":[1],"data":[-5]}}]}}"#,
            text[0], text[1], text[2], text[3]
        );
        let r = decode(Bytes::from(json), None, "m").unwrap();
        let want: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(&r.raw_output_contents[0][..], &want[..]);
        assert_eq!(&r.raw_output_contents[1][..], &(-5i64).to_le_bytes());
        let bad = br#"{"outputs":[{"name":"a","datatype":"FP32","shape":[1],"data":["x"]}]}"#;
        let e = decode(Bytes::from_static(bad), None, "m").unwrap_err();
        assert!(e.contains(r#"output "a" of model "m": "x" is not"#), "{e}");
    }

    #[test]
    fn text_inputs_carry_their_strings_or_where_they_lie_in_shared_memory() {
        let at = crate::backend::request::ShmInputs {
            region: "r".into(),
            offset: 4096,
        };
        let binding = std::sync::Arc::new(crate::backend::text::logits_binding_for_tests(0));
        let pairs = vec![("Who?".into(), "Ada.".into())];
        let request = InferRequest::text(&binding, pairs).unwrap();
        let body = |at: Option<&crate::backend::request::ShmInputs>| {
            let r = match at {
                Some(at) => request.clone().with_shm_inputs(at.clone()),
                None => request.clone(),
            };
            let body = text_body(&r, true);
            serde_json::from_slice::<serde_json::Value>(&body).unwrap()
        };
        let plain = body(None);
        assert_eq!(plain["inputs"][0]["data"], serde_json::json!(["Who?"]));
        assert!(plain["inputs"][0].get("parameters").is_none());
        assert_eq!(plain["outputs"][0]["parameters"]["binary_data"], true);
        let placed = body(Some(&at));
        let (q, c) = (&placed["inputs"][0], &placed["inputs"][1]);
        assert!(
            q.get("data").is_none() && c.get("data").is_none(),
            "{placed}"
        );
        assert_eq!(q["parameters"]["shared_memory_region"], "r");
        assert_eq!(q["parameters"]["shared_memory_offset"], 4096);
        assert_eq!(q["parameters"]["shared_memory_byte_size"], 8);
        assert_eq!(c["parameters"]["shared_memory_offset"], 4096 + 8);
        assert_eq!(c["parameters"]["shared_memory_byte_size"], 8);
        assert_eq!(
            placed["outputs"], plain["outputs"],
            "outputs in the message"
        );
    }

    #[test]
    fn outputs_in_shared_memory_have_empty_entries() {
        let json = br#"{"outputs":[{"name":"a","datatype":"FP32","shape":[1,2],
            "parameters":{"shared_memory_region":"r","shared_memory_byte_size":8}}]}"#;
        let r = decode(Bytes::from_static(json), None, "m").unwrap();
        assert_eq!(r.raw_output_contents, vec![Bytes::new()]);
    }
}
