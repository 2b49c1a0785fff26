//! The API's one error shape: an HTTP status and `{"error", "field", "message"}`, where
//! `error` is a stable snake_case code and `field` names the request field at fault
//! (`null` when none is). Kafka error codes from the layers below become the matching
//! status here and nowhere else.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kafka_protocol::error::ResponseError;
use serde_json::{json, Value};

use super::json_response;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub error: String,
    pub field: Option<String>,
    pub message: String,
    /// More members of the body (the current assignment on a rebalance).
    pub extra: Option<Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, error: &str, field: Option<&str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error: error.to_owned(),
            field: field.map(str::to_owned),
            message: message.into(),
            extra: None,
        }
    }

    /// 400: `field` of the request is missing or not what it must be.
    pub fn bad(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_field", Some(field), message)
    }

    pub fn with_extra(mut self, extra: Value) -> ApiError {
        self.extra = Some(extra);
        self
    }

    /// A Kafka error from the layers below, with its message.
    pub fn kafka(e: ResponseError, field: Option<&str>, message: impl Into<String>) -> ApiError {
        ApiError::new(kafka_status(e), &snake_case(&format!("{e:?}")), field, message)
    }

    pub fn body(&self) -> Value {
        let mut body = json!({"error": self.error, "field": self.field, "message": self.message});
        if let (Some(Value::Object(extra)), Some(obj)) = (&self.extra, body.as_object_mut()) {
            obj.extend(extra.clone());
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_response(self.status, &self.body())
    }
}

/// The status a client should see for a Kafka error: its fault (4xx), a state that
/// passes (409 rebalance, 503 retry elsewhere or later), or the broker's (500).
pub fn kafka_status(e: ResponseError) -> StatusCode {
    use ResponseError::*;
    match e {
        UnknownTopicOrPartition | UnknownTopicId | GroupIdNotFound => StatusCode::NOT_FOUND,
        TopicAlreadyExists => StatusCode::CONFLICT,
        RebalanceInProgress
        | IllegalGeneration
        | UnknownMemberId
        | FencedInstanceId
        | InconsistentGroupProtocol
        | NonEmptyGroup
        | GroupSubscribedToTopic
        | GroupMaxSizeReached => StatusCode::CONFLICT,
        MessageTooLarge | RecordListTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        NotLeaderOrFollower
        | LeaderNotAvailable
        | NotEnoughReplicas
        | NotEnoughReplicasAfterAppend
        | NotCoordinator
        | CoordinatorNotAvailable
        | CoordinatorLoadInProgress
        | NotController => StatusCode::SERVICE_UNAVAILABLE,
        RequestTimedOut => StatusCode::GATEWAY_TIMEOUT,
        KafkaStorageError | UnknownServerError => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// `NotEnoughReplicas` → `not_enough_replicas`.
fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_errors_get_snake_case_codes_and_statuses() {
        let e = ApiError::kafka(ResponseError::NotEnoughReplicas, None, "x");
        assert_eq!(e.error, "not_enough_replicas");
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(ApiError::kafka(ResponseError::TopicAlreadyExists, Some("name"), "").status, StatusCode::CONFLICT);
        let body = ApiError::bad("acks", "no").with_extra(json!({"generation_id": 3})).body();
        assert_eq!(body, json!({"error": "invalid_field", "field": "acks", "message": "no", "generation_id": 3}));
    }
}
