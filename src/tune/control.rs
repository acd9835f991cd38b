#![cfg_attr(
    not(feature = "internals"),
    allow(
        unreachable_pub,
        dead_code,
        reason = "public with the `internals` feature"
    )
)]
//! The model's configuration on the live server: read, loaded with an override,
//! confirmed, put back. Over Triton's HTTP repository API, where the configuration is
//! JSON with every field (`tune` must load back exactly what it read).
//!
//! Contract:
//! - [`Control::open`] refuses, in one sentence naming what is missing, a server that
//!   is not Triton, lacks the model configuration or repository extension, or does not
//!   run in explicit model-control mode (probed by unloading a model name the
//!   repository does not have: explicit mode answers success, any other mode refuses
//!   every load and unload; no model is touched).
//! - [`Control::apply`] loads a candidate, reads the configuration back, compares it
//!   with what was asked ([`config::confirm`]) and waits until the model is ready; each
//!   failure is a [`Failure`] with the server's words. A failed load leaves the
//!   previous configuration serving (Triton's rule).
//! - [`Control::restore`] loads the original as an override and reads it back: equal
//!   to the original, or an error saying so.

use std::time::Duration;

use serde_json::Value;

use super::config::{self, Settings};
use crate::backend::http::HttpClient;
use crate::backend::Pool;
use crate::error::{Error, Result};

/// How long a loaded candidate may take to answer ready.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// The repository calls of one model on one server.
pub struct Control {
    server: Pool,
    model: String,
    url: String,
    /// Once cancelled, waiting for a candidate to be ready gives up.
    stop: Option<tokio_util::sync::CancellationToken>,
}

/// Why a candidate is not measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// The server refused the load (its message).
    Load(String),
    /// Loaded, but the configuration read back is not the candidate.
    NotApplied(String),
    /// Loaded, but not ready in time.
    NotReady(String),
}

impl Failure {
    /// The report's `status`.
    pub(crate) fn status(&self) -> &'static str {
        match self {
            Failure::Load(_) => "failed_to_load",
            Failure::NotApplied(_) => "not_applied",
            Failure::NotReady(_) => "not_ready",
        }
    }

    pub(crate) fn message(&self) -> &str {
        match self {
            Failure::Load(m) | Failure::NotApplied(m) | Failure::NotReady(m) => m,
        }
    }
}

impl Control {
    /// Checks that `server` (HTTP, one endpoint) is a Triton in explicit model-control
    /// mode.
    pub async fn open(server: Pool, model: &str) -> Result<Control> {
        let client = server.first_client();
        let url = client.url().to_string();
        let Some(http) = client.http() else {
            return Err(Error::Config(format!(
                "{url}: `tune` reads and loads model configurations over HTTP: give the \
                 server's HTTP address as the `control_url`"
            )));
        };
        let info = client.server_info().await?;
        let missing: Vec<&str> = ["model_configuration", "model_repository"]
            .into_iter()
            .filter(|e| !info.lists(e))
            .collect();
        if !info.is_triton() || !missing.is_empty() {
            return Err(Error::Config(format!(
                "{url}: {} has no {} (`tune` needs NVIDIA Triton's model configuration \
                 and repository extensions, in explicit model-control mode)",
                info.label(),
                if missing.is_empty() {
                    "configuration override on load".to_string()
                } else {
                    format!("{} extension", missing.join(" or "))
                }
            )));
        }
        let index = client.repository_index().await?;
        let mut probe = "bertqa-tune-mode-probe".to_string();
        while index.iter().any(|m| m.name == probe) {
            probe.push('_');
        }
        match http.unload_model(&probe).await {
            Ok(()) => {}
            // Triton's answer in the other modes: "explicit model load / unload is not
            // allowed if polling is enabled" (503).
            Err(e) if server_words(&e).contains("not allowed") => {
                return Err(Error::Config(format!(
                    "{url}: Triton refuses to load and unload models ({}): start it with \
                     --model-control-mode=explicit --load-model={model}",
                    server_words(&e)
                )));
            }
            Err(e) => return Err(e),
        }
        Ok(Control {
            server,
            model: model.to_string(),
            url,
            stop: None,
        })
    }

    /// Waiting for a candidate gives up once `stop` is cancelled (the original is put
    /// back all the same).
    pub fn stop_with(mut self, stop: tokio_util::sync::CancellationToken) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The server's HTTP address.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    fn http(&self) -> &HttpClient {
        self.server.first_client().http().expect("checked by open")
    }

    /// The model's configuration as the server reports it now.
    pub(crate) async fn config(&self) -> Result<Value> {
        self.http().model_config_json(&self.model).await
    }

    /// Loads `candidate` (built from the original by [`config::candidate`]), reads it
    /// back, and waits until the model is ready; the configuration read back.
    pub(crate) async fn apply(
        &self,
        candidate: &Value,
        settings: &Settings,
        marker: Option<&str>,
    ) -> Result<std::result::Result<Value, Failure>> {
        let text = candidate.to_string();
        if let Err(e) = self.http().load_model(&self.model, Some(&text)).await {
            return match e {
                Error::Server { .. } | Error::ModelNotFound { .. } => {
                    Ok(Err(Failure::Load(server_words(&e))))
                }
                other => Err(other),
            };
        }
        let read = self.config().await?;
        if let Err(why) = config::confirm(&read, settings, marker) {
            return Ok(Err(Failure::NotApplied(why)));
        }
        if !self.wait_ready(self.stop.as_ref()).await? {
            return Ok(Err(Failure::NotReady(format!(
                "model {:?} not ready {} s after its load (or stopped while waiting)",
                self.model,
                READY_WITHIN.as_secs()
            ))));
        }
        Ok(Ok(read))
    }

    /// Whether the model answers ready within [`READY_WITHIN`] (false once `stop` is
    /// cancelled).
    async fn wait_ready(&self, stop: Option<&tokio_util::sync::CancellationToken>) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            if self
                .server
                .first_client()
                .model_ready(&self.model, "")
                .await?
            {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline || stop.is_some_and(|s| s.is_cancelled()) {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Puts `original` back and reads it back; an error when the server then reports
    /// anything else.
    pub(crate) async fn restore(&self, original: &Value) -> Result<()> {
        self.http()
            .load_model(&self.model, Some(&original.to_string()))
            .await?;
        let read = self.config().await?;
        if &read != original {
            return Err(Error::Config(format!(
                "{}: model {:?} was loaded with its original configuration, but the \
                 server now reports another ({})",
                self.url,
                self.model,
                first_difference(original, &read)
            )));
        }
        if !self.wait_ready(None).await? {
            return Err(Error::Config(format!(
                "{}: model {:?} has its original configuration back but is not ready",
                self.url, self.model
            )));
        }
        Ok(())
    }
}

/// The server's own message in an error, else the error.
fn server_words(e: &Error) -> String {
    match e {
        Error::Server { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The first top-level field that differs, in words.
pub(crate) fn first_difference(a: &Value, b: &Value) -> String {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return "not an object".into();
    };
    for (k, v) in a {
        match b.get(k) {
            None => return format!("`{k}` is gone"),
            Some(w) if w != v => return format!("`{k}` is {w} instead of {v}"),
            _ => {}
        }
    }
    match b.keys().find(|k| !a.contains_key(*k)) {
        Some(k) => format!("`{k}` was added"),
        None => "no field differs".into(),
    }
}
