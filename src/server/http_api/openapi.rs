//! `GET /openapi.json`: the OpenAPI 3 description of the API, written by hand next to
//! the routes; a test checks that every route [`super::api_routes`] registers is in it.

use serde_json::{json, Value};

fn error_response(what: &str) -> Value {
    json!({"description": what, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn ok(what: &str, schema: Value) -> Value {
    json!({"description": what, "content": {"application/json": {"schema": schema}}})
}

fn html(what: &str, media_type: &str) -> Value {
    json!({"description": what, "content": {media_type: {"schema": {"type": "string"}}}})
}

fn path_param(name: &str, kind: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": kind}})
}

fn query_param(name: &str, kind: &str, what: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": {"type": kind}, "description": what})
}

fn body(schema: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

fn schemas() -> Value {
    json!({
        "Error": {"type": "object", "required": ["error", "field", "message"], "properties": {
            "error": {"type": "string", "description": "a stable snake_case code, e.g. invalid_field, rebalance"},
            "field": {"type": ["string", "null"], "description": "the request field at fault"},
            "message": {"type": "string"}}},
        "Bytes": {"type": ["string", "null"],
            "description": "UTF-8 text, or base64 when the record says \"encoding\": \"base64\""},
        "Header": {"type": "object", "properties": {"key": {"type": "string"}, "value": {"$ref": "#/components/schemas/Bytes"}}},
        "NewRecord": {"type": "object", "properties": {
            "key": {"$ref": "#/components/schemas/Bytes"},
            "value": {"$ref": "#/components/schemas/Bytes"},
            "headers": {"oneOf": [{"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Bytes"}},
                {"type": "array", "items": {"$ref": "#/components/schemas/Header"}}]},
            "partition": {"type": "integer", "minimum": 0},
            "timestamp": {"type": "integer", "description": "create time in ms; default now"},
            "encoding": {"type": "string", "enum": ["utf-8", "base64"]}}},
        "Produced": {"type": "object", "properties": {"partition": {"type": "integer"},
            "offset": {"type": "integer", "description": "absent for acks=0"}, "timestamp": {"type": "integer"}}},
        "Record": {"type": "object", "properties": {
            "topic": {"type": "string"}, "partition": {"type": "integer"}, "offset": {"type": "integer"},
            "timestamp": {"type": "integer"}, "key": {"$ref": "#/components/schemas/Bytes"},
            "value": {"$ref": "#/components/schemas/Bytes"},
            "headers": {"type": "array", "items": {"$ref": "#/components/schemas/Header"}},
            "encoding": {"type": "string", "enum": ["base64"], "description": "present when the bytes fields are base64"}}},
        "Broker": {"type": "object", "properties": {"node_id": {"type": "integer"}, "host": {"type": "string"},
            "port": {"type": "integer"}, "rack": {"type": ["string", "null"]}, "fenced": {"type": "boolean"},
            "controller": {"type": "boolean", "description": "the active controller"},
            "this_broker": {"type": "boolean"}}},
        "Topic": {"type": "object", "properties": {"name": {"type": "string"}, "topic_id": {"type": "string"},
            "internal": {"type": "boolean"}, "configs": {"type": "object", "additionalProperties": {"type": "string"}},
            "partitions": {"type": "array", "items": {"type": "object", "properties": {
                "partition": {"type": "integer"}, "leader": {"type": "integer"}, "leader_epoch": {"type": "integer"},
                "replicas": {"type": "array", "items": {"type": "integer"}},
                "isr": {"type": "array", "items": {"type": "integer"}},
                "earliest": {"type": ["integer", "null"], "description": "log start offset; null unless this broker leads"},
                "latest": {"type": ["integer", "null"], "description": "high watermark; null unless this broker leads"},
                "size_bytes": {"type": ["integer", "null"], "description": "of this broker's replica; null without one"}}}}}},
        "GroupDetail": {"type": "object", "properties": {"group_id": {"type": "string"}, "state": {"type": "string"},
            "protocol_type": {"type": "string"}, "protocol": {"type": "string"},
            "members": {"type": "array", "items": {"type": "object", "properties": {
                "member_id": {"type": "string"}, "group_instance_id": {"type": ["string", "null"]},
                "client_id": {"type": "string"}, "client_host": {"type": "string"},
                "assignment": {"$ref": "#/components/schemas/Assigned"}}}},
            "offsets": {"type": "array", "items": {"type": "object", "properties": {
                "topic": {"type": "string"}, "partition": {"type": "integer"},
                "member_id": {"type": ["string", "null"], "description": "the member assigned the partition"},
                "committed": {"type": ["integer", "null"]},
                "latest": {"type": ["integer", "null"], "description": "high watermark; null unless this broker leads"},
                "lag": {"type": ["integer", "null"]}}}}}},
        "Assigned": {"type": "array", "items": {"type": "object", "properties": {
            "topic": {"type": "string"}, "partitions": {"type": "array", "items": {"type": "integer"}}}}}
    })
}

/// The read-only views and the web console ([`super::views`], [`super::records`],
/// [`super::console`]).
fn view_paths(topic: Value, group: Value, e400: Value, e404: Value, e503: Value) -> Value {
    json!({
            "/": {"get": {"summary": "the web console (HTML)", "responses": {"200": html("the console page", "text/html")}}},
            "/console/console.js": {"get": {"summary": "the web console's script",
                "responses": {"200": html("script", "text/javascript")}}},
            "/console/console.css": {"get": {"summary": "the web console's style sheet",
                "responses": {"200": html("style sheet", "text/css")}}},
            "/cluster": {"get": {"summary": "the cluster id, the active controller and the brokers",
                "responses": {"200": ok("the cluster", json!({"type": "object", "properties": {
                    "cluster_id": {"type": "string"}, "controller_id": {"type": ["integer", "null"]},
                    "node_id": {"type": "integer", "description": "the broker answering"},
                    "brokers": {"type": "array", "items": {"$ref": "#/components/schemas/Broker"}}}}))}}},
            "/consumer-groups": {"get": {"summary": "the consumer groups this broker coordinates",
                "responses": {"200": ok("groups", json!({"type": "object", "properties": {"groups": {"type": "array",
                    "items": {"type": "object", "properties": {"group_id": {"type": "string"},
                        "protocol_type": {"type": "string"}, "state": {"type": "string"}}}}}})),
                    "503": e503}}},
            "/consumer-groups/{group}": {"get": {"summary": "a group's members, committed offsets and lag per partition",
                "parameters": [group],
                "responses": {"200": ok("the group", json!({"$ref": "#/components/schemas/GroupDetail"})),
                    "400": e400, "404": error_response("no such group"), "503": e503}}},
            "/topics/{topic}/partitions/{n}/records": {"get": {
                "summary": "a page of a partition's records from an offset or a timestamp, up to the high watermark",
                "parameters": [topic, path_param("n", "integer"),
                    query_param("offset", "integer", "from this offset; default the log start offset"),
                    query_param("timestamp", "integer", "from the first record with a timestamp at or after this (ms)"),
                    query_param("limit", "integer", "records in the page, default 50, at most 500")],
                "responses": {"200": ok("records", json!({"type": "object", "properties": {
                    "topic": {"type": "string"}, "partition": {"type": "integer"},
                    "earliest": {"type": "integer"}, "latest": {"type": "integer"},
                    "start_offset": {"type": "integer"}, "next_offset": {"type": "integer"},
                    "records": {"type": "array", "items": {"$ref": "#/components/schemas/Record"}}}})),
                    "400": e400, "404": e404, "416": error_response("offset out of range"),
                    "503": e503}}}
    })
}

pub fn document() -> Value {
    let topic = path_param("topic", "string");
    let group = path_param("group", "string");
    let e400 = error_response("invalid input; `field` names it");
    let e404 = error_response("unknown topic, partition or member");
    let e409 = error_response(
        "conflict: the topic exists, or the group rebalanced (error \"rebalance\", with the current assignment)",
    );
    let e503 = error_response("not the leader or the group coordinator, or not enough replicas");
    let views = view_paths(topic.clone(), group.clone(), e400.clone(), e404.clone(), e503.clone());
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {"title": "runnel HTTP API", "version": env!("CARGO_PKG_VERSION"),
            "description": "Topics, partitions and consumer groups of the broker, as the Kafka protocol sees them."},
        "paths": {
            "/health": {"get": {"summary": "200 while the process runs", "responses": {"200": {"description": "ok"}}}},
            "/ready": {"get": {"summary": "200 while the broker serves clients", "responses": {
                "200": {"description": "ready"}, "503": {"description": "not ready, with the reason"}}}},
            "/metrics": {"get": {"summary": "Prometheus text format", "responses": {"200": {"description": "metrics"}}}},
            "/openapi.json": {"get": {"summary": "this document", "responses": {"200": ok("OpenAPI 3", json!({"type": "object"}))}}},
            "/topics": {"get": {"summary": "every topic with its partitions",
                "responses": {"200": ok("topics", json!({"type": "object", "properties": {"topics": {"type": "array",
                    "items": {"$ref": "#/components/schemas/Topic"}}}}))}},
                "post": {"summary": "create a topic",
                "requestBody": body(json!({"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "partitions": {"type": "integer", "minimum": 1},
                    "replication_factor": {"type": "integer", "minimum": 1},
                    "configs": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}}})),
                "responses": {"201": ok("created", json!({"type": "object", "properties": {"name": {"type": "string"},
                    "topic_id": {"type": "string"}, "partitions": {"type": "integer"}, "replication_factor": {"type": "integer"}}})),
                    "400": e400, "409": e409, "503": e503}}},
            "/topics/{topic}/messages": {"post": {"summary": "produce one record or a batch of up to 1000",
                "parameters": [topic, query_param("acks", "string", "0, 1 (default) or all")],
                "requestBody": body(json!({"oneOf": [{"$ref": "#/components/schemas/NewRecord"},
                    {"type": "array", "items": {"$ref": "#/components/schemas/NewRecord"}, "maxItems": 1000},
                    {"type": "object", "required": ["records"], "properties": {"records": {"type": "array",
                        "items": {"$ref": "#/components/schemas/NewRecord"}, "maxItems": 1000}}}]})),
                "responses": {"200": ok("one result for a record, {offsets: [...]} for a batch", json!({"oneOf": [
                    {"$ref": "#/components/schemas/Produced"},
                    {"type": "object", "properties": {"offsets": {"type": "array", "items": {"$ref": "#/components/schemas/Produced"}}}}]})),
                    "400": e400, "404": e404, "413": error_response("a record or the body is too large"), "503": e503}}},
            "/topics/{topic}/partitions/{n}/watermark": {"get": {"summary": "log start offset and high watermark",
                "parameters": [topic, path_param("n", "integer")],
                "responses": {"200": ok("offsets", json!({"type": "object", "properties": {
                    "earliest": {"type": "integer"}, "latest": {"type": "integer", "description": "the high watermark"}}})),
                    "400": e400, "404": e404, "503": e503}}},
            "/consumer-groups/{group}/join": {"post": {"summary": "join a consumer group as a classic-protocol member",
                "parameters": [group],
                "requestBody": body(json!({"type": "object", "required": ["consumer_id", "topics"], "properties": {
                    "consumer_id": {"type": "string", "description": "the client's name for this member, unique in the group"},
                    "topics": {"type": "array", "items": {"type": "string"}},
                    "session_timeout_ms": {"type": "integer", "description": "default 30000; without a poll for this long the member leaves"}}})),
                "responses": {"200": ok("joined", json!({"type": "object", "properties": {
                    "member_id": {"type": "string"}, "generation_id": {"type": "integer"},
                    "assigned_partitions": {"$ref": "#/components/schemas/Assigned"}, "session_timeout_ms": {"type": "integer"}}})),
                    "202": {"description": "still joining after 60 s; poll to see the assignment"},
                    "400": e400, "409": e409, "503": e503}}},
            "/consumer-groups/{group}/poll": {"get": {"summary": "long-poll records of the member's partitions",
                "parameters": [group,
                    {"name": "consumer_id", "in": "query", "required": true, "schema": {"type": "string"}},
                    query_param("topic", "string", "only this topic (one the member subscribed to)"),
                    query_param("partition", "integer", "only this partition (409 rebalance when not assigned)"),
                    query_param("offset", "integer", "from this offset; default the member's position, else the committed offset, else the earliest"),
                    query_param("max_wait_ms", "integer", "default 1000, at most 30000"),
                    query_param("max_bytes", "integer", "default 1 MiB, at most 8 MiB")],
                "responses": {"200": ok("records", json!({"type": "object", "properties": {
                    "generation_id": {"type": "integer"}, "assigned_partitions": {"$ref": "#/components/schemas/Assigned"},
                    "records": {"type": "array", "items": {"$ref": "#/components/schemas/Record"}}}})),
                    "400": e400, "404": e404, "409": e409, "416": error_response("offset out of range"), "503": e503}}},
            "/consumer-groups/{group}/commit": {"post": {"summary": "commit offsets as the member",
                "parameters": [group],
                "requestBody": body(json!({"type": "object", "required": ["consumer_id", "offsets"], "properties": {
                    "consumer_id": {"type": "string"},
                    "offsets": {"type": "array", "items": {"type": "object", "required": ["topic", "partition", "offset"],
                        "properties": {"topic": {"type": "string"}, "partition": {"type": "integer"},
                        "offset": {"type": "integer", "description": "the next offset to consume"},
                        "metadata": {"type": "string"}}}}}})),
                "responses": {"200": ok("committed", json!({"type": "object", "properties": {
                    "committed": {"type": "integer"}, "generation_id": {"type": "integer"}}})),
                    "400": e400, "404": e404, "409": e409, "503": e503}}}
        },
        "components": {"schemas": schemas()}
    });
    if let (Some(paths), Value::Object(more)) = (doc["paths"].as_object_mut(), views) {
        paths.extend(more);
    }
    doc
}
