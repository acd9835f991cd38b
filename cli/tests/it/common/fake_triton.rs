//! An in-process fake Triton: our generated gRPC server stubs on a loopback port, one
//! model "m" whose tensors, readiness and answers a test sets (`Fake`), for the answers
//! a real server cannot be made to give on demand.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bertqa::proto::grpc_inference_service_server::{
    GrpcInferenceService, GrpcInferenceServiceServer,
};
use bertqa::proto::model_metadata_response::TensorMetadata;
use bertqa::proto::repository_index_response::ModelIndex;
use bertqa::proto::*;
use tonic::{Request, Response, Status};

use super::rt;

pub type Infer = dyn Fn(&ModelInferRequest) -> Result<ModelInferResponse, Status> + Send + Sync;

/// One fake model named "m" with the given tensors and inference behaviour.
#[derive(Clone)]
pub struct Fake {
    pub inputs: Vec<(&'static str, &'static str, Vec<i64>)>,
    pub outputs: Vec<(&'static str, &'static str, Vec<i64>)>,
    pub ready: bool,
    pub infer: Arc<Infer>,
    /// Wait this long before answering an inference (asynchronously).
    pub delay: Option<Duration>,
    /// Accept shared memory registrations (and unregistrations) without mapping them.
    pub shm: bool,
    /// Offer `ModelStreamInfer` (answering each request with `infer`, an error as the
    /// stream's error message), ending each stream with UNAVAILABLE after this many
    /// responses; `None`: UNIMPLEMENTED, as a server without streams.
    pub stream_cut: Option<usize>,
    /// `ModelInfer` calls and `ModelStreamInfer` requests served.
    pub unary_calls: Arc<AtomicUsize>,
    pub streamed: Arc<AtomicUsize>,
}

fn tensors(ts: &[(&str, &str, Vec<i64>)]) -> Vec<TensorMetadata> {
    ts.iter()
        .map(|(n, d, s)| TensorMetadata {
            name: n.to_string(),
            datatype: d.to_string(),
            shape: s.clone(),
        })
        .collect()
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in the fake"))
}

#[tonic::async_trait]
impl GrpcInferenceService for Fake {
    async fn server_live(
        &self,
        _: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }
    async fn server_ready(
        &self,
        _: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        Ok(Response::new(ServerReadyResponse { ready: true }))
    }
    async fn model_ready(
        &self,
        _: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        Ok(Response::new(ModelReadyResponse { ready: self.ready }))
    }
    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        Ok(Response::new(ServerMetadataResponse {
            name: "fake".into(),
            version: "0".into(),
            extensions: vec![],
        }))
    }
    async fn model_metadata(
        &self,
        r: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        let name = r.into_inner().name;
        if name != "m" {
            return Err(Status::not_found(format!(
                "Request for unknown model: '{name}' is not found"
            )));
        }
        if !self.ready {
            return Err(Status::unavailable(
                "Request for unknown model: 'm' has no available versions",
            ));
        }
        Ok(Response::new(ModelMetadataResponse {
            name,
            versions: vec!["1".into()],
            platform: "fake".into(),
            inputs: tensors(&self.inputs),
            outputs: tensors(&self.outputs),
        }))
    }
    async fn model_infer(
        &self,
        r: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        self.unary_calls.fetch_add(1, Ordering::SeqCst);
        (self.infer)(&r.into_inner()).map(Response::new)
    }
    type ModelStreamInferStream =
        tokio_stream::wrappers::ReceiverStream<Result<ModelStreamInferResponse, Status>>;
    async fn model_stream_infer(
        &self,
        r: Request<tonic::Streaming<ModelInferRequest>>,
    ) -> Result<Response<Self::ModelStreamInferStream>, Status> {
        let Some(cut) = self.stream_cut else {
            return unimplemented();
        };
        let (infer, streamed) = (self.infer.clone(), self.streamed.clone());
        let mut requests = r.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut answered = 0;
            while let Ok(Some(request)) = requests.message().await {
                if answered == cut {
                    let _ = tx.send(Err(Status::unavailable("stream cut"))).await;
                    return;
                }
                answered += 1;
                streamed.fetch_add(1, Ordering::SeqCst);
                let id = request.id.clone();
                let message = match infer(&request) {
                    Ok(response) => ModelStreamInferResponse {
                        error_message: String::new(),
                        infer_response: Some(ModelInferResponse { id, ..response }),
                    },
                    Err(status) => ModelStreamInferResponse {
                        error_message: status.message().into(),
                        infer_response: Some(ModelInferResponse {
                            id,
                            ..Default::default()
                        }),
                    },
                };
                if tx.send(Ok(message)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
    }
    async fn model_config(
        &self,
        _: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        if !self.ready {
            return Err(Status::unavailable(
                "Request for unknown model: 'm' has no available versions",
            ));
        }
        Ok(Response::new(ModelConfigResponse {
            config: Some(ModelConfig {
                name: "m".into(),
                max_batch_size: 8,
                ..Default::default()
            }),
        }))
    }
    async fn model_statistics(
        &self,
        _: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        unimplemented()
    }
    async fn repository_index(
        &self,
        _: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        Ok(Response::new(RepositoryIndexResponse {
            models: vec![
                ModelIndex {
                    name: "m".into(),
                    version: "1".into(),
                    state: if self.ready { "READY" } else { "UNAVAILABLE" }.into(),
                    reason: if self.ready { "" } else { "load failed" }.into(),
                },
                ModelIndex {
                    name: "other".into(),
                    version: "1".into(),
                    state: "READY".into(),
                    reason: String::new(),
                },
            ],
        }))
    }
    async fn repository_model_load(
        &self,
        _: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        unimplemented()
    }
    async fn repository_model_unload(
        &self,
        _: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        unimplemented()
    }
    async fn system_shared_memory_register(
        &self,
        _: Request<SystemSharedMemoryRegisterRequest>,
    ) -> Result<Response<SystemSharedMemoryRegisterResponse>, Status> {
        match self.shm {
            true => Ok(Response::new(SystemSharedMemoryRegisterResponse {})),
            false => unimplemented(),
        }
    }
    async fn system_shared_memory_unregister(
        &self,
        _: Request<SystemSharedMemoryUnregisterRequest>,
    ) -> Result<Response<SystemSharedMemoryUnregisterResponse>, Status> {
        match self.shm {
            true => Ok(Response::new(SystemSharedMemoryUnregisterResponse {})),
            false => unimplemented(),
        }
    }
}

pub fn nvidia() -> Fake {
    Fake {
        inputs: vec![
            ("input__0", "INT64", vec![-1, 384]),
            ("input__1", "INT64", vec![-1, 384]),
            ("input__2", "INT64", vec![-1, 384]),
        ],
        outputs: vec![
            ("output__0", "FP32", vec![-1, 384]),
            ("output__1", "FP32", vec![-1, 384]),
        ],
        ready: true,
        infer: Arc::new(|_| Err(Status::internal("no inference configured"))),
        delay: None,
        shm: false,
        stream_cut: None,
        unary_calls: Arc::default(),
        streamed: Arc::default(),
    }
}

/// Serves `fake` on a loopback port; returns the runtime (keep it alive) and the URL.
pub fn serve(fake: Fake) -> (tokio::runtime::Runtime, String) {
    let rt = rt();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(GrpcInferenceServiceServer::new(fake))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (rt, url)
}
