//! The README's "What is served" table is generated from the code
//! (`runnel::protocol::api_table`), and every API kafka-protocol defines is either served,
//! listed as not served with a reason and a plan, or known not to be client-facing.
//!
//! Regenerate the README section with `RUNNEL_UPDATE_README=1 cargo test --test api_table`.

use kafka_protocol::messages::ApiKey;
use runnel::protocol::api_table::{self, classification, render_readme_table};

const START: &str = "<!-- api-table:start (generated: RUNNEL_UPDATE_README=1 cargo test --test api_table) -->\n";
const END: &str = "<!-- api-table:end -->";

#[test]
fn every_api_kafka_protocol_defines_is_served_or_explained() {
    let unexplained: Vec<ApiKey> = ApiKey::iter().filter(|k| classification(*k).is_none()).collect();
    assert!(
        unexplained.is_empty(),
        "kafka-protocol defines APIs that runnel neither serves nor lists in api_table.rs \
         (NOT_SERVED with a reason and a plan, or NOT_CLIENT_FACING): {unexplained:?}"
    );
    // Each API in one list only.
    for key in ApiKey::iter() {
        let lists = [
            runnel::protocol::versions::supported(key).is_some(),
            api_table::NOT_SERVED.iter().any(|(k, _)| *k == key),
            api_table::NOT_CLIENT_FACING.contains(&key),
        ];
        assert_eq!(lists.iter().filter(|x| **x).count(), 1, "{key:?} is in {lists:?}");
    }
    // A note is only for a served API.
    for (key, _) in api_table::SERVED_NOTES {
        assert_eq!(classification(*key), Some("served"), "note for {key:?}");
    }
}

#[test]
fn readme_table_is_generated_from_the_code() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme.find(START).expect("README has the api-table start marker") + START.len();
    let end = readme[start..].find(END).expect("README has the api-table end marker") + start;
    let table = render_readme_table();
    if std::env::var_os("RUNNEL_UPDATE_README").is_some() {
        let updated = format!("{}{table}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        readme[start..end] == table,
        "README.md's API table is stale: run RUNNEL_UPDATE_README=1 cargo test --test api_table\n\
         --- generated ---\n{table}"
    );
}
