//! rskafka (a pure-Rust Kafka client: its own protocol code, no librdkafka) run against VDL as a
//! Rust application would, by the tests (tests/support/polyglot.py's protocol):
//!
//!     vdl-rskafka SCENARIO JSON-ARGS      prints one {"result": ...} line
//!
//! - produce: each of `topics` created, `count` records written to it with its codec of `codecs`
//!   (acks=all, rskafka's only setting), all read back;
//! - admin: `topics[0]` created, created again and with two partitions (both refused), its
//!   offsets at the start, the end and a timestamp, the records before offset 3 deleted, the
//!   stream deleted and gone from Metadata.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use serde_json::{json, Value};

/// Record `i` as every test driver makes it (polyglot.expected_record): every third without a
/// key, two headers (one empty), the timestamp base + i.
fn record(i: i64, base_millis: i64) -> Record {
    let headers = BTreeMap::from([("i".to_string(), i.to_string().into_bytes()), ("empty".to_string(), vec![])]);
    Record {
        key: (i % 3 != 0).then(|| format!("key-{i}").into_bytes()),
        value: Some(format!("value-{i}-{}", "x".repeat((i % 7) as usize)).into_bytes()),
        headers,
        timestamp: Utc.timestamp_millis_opt(base_millis + i).unwrap(),
    }
}

fn text(bytes: &Option<Vec<u8>>) -> Value {
    bytes.as_ref().map_or(Value::Null, |b| Value::String(String::from_utf8_lossy(b).into_owned()))
}

fn codec(name: &str) -> Compression {
    match name {
        "none" => Compression::NoCompression,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => panic!("unknown codec {other}"),
    }
}

async fn partition(client: &Client, topic: &str) -> PartitionClient {
    client.partition_client(topic, 0, UnknownTopicHandling::Retry).await.expect("partition client")
}

/// Every record of `topic` from offset `from` up to `until`, as the tests spell them.
async fn read_all(client: &Client, topic: &str, from: i64, until: i64) -> Vec<Value> {
    let partition = partition(client, topic).await;
    let mut read = Vec::new();
    let mut next = from;
    while next < until {
        let (records, _high_watermark) = partition.fetch_records(next, 1..1_000_000, 1_000).await.expect("fetch");
        for r in records {
            next = r.offset + 1;
            let headers: Vec<Value> = r.record.headers.iter()
                .map(|(k, v)| json!([k, String::from_utf8_lossy(v)]))
                .collect();
            read.push(json!({"topic": topic, "offset": r.offset, "key": text(&r.record.key),
                             "value": text(&r.record.value), "headers": headers,
                             "timestamp": r.record.timestamp.timestamp_millis()}));
        }
    }
    read
}

async fn produce(client: &Client, args: &Value) -> Value {
    let controller = client.controller_client().expect("controller client");
    let (count, base) = (args["count"].as_i64().unwrap(), args["base_millis"].as_i64().unwrap());
    let mut acked = BTreeMap::new();
    let mut records = BTreeMap::new();
    for (topic, name) in args["topics"].as_array().unwrap().iter().zip(args["codecs"].as_array().unwrap()) {
        let (topic, name) = (topic.as_str().unwrap(), name.as_str().unwrap());
        let replication = args["replication"].as_i64().unwrap() as i16;
        controller.create_topic(topic, 1, replication, 5_000).await.expect("create");
        let partition = partition(client, topic).await;
        let mut offsets = Vec::new();
        for start in (0..count).step_by(10) {
            let batch = (start..(start + 10).min(count)).map(|i| record(i, base)).collect();
            offsets.extend(partition.produce(batch, codec(name)).await.expect("produce"));
        }
        acked.insert(name, json!(offsets));
        records.insert(name, json!(read_all(client, topic, 0, count).await));
    }
    json!({"acked": acked, "records": records})
}

async fn admin(client: &Client, args: &Value) -> Value {
    let controller = client.controller_client().expect("controller client");
    let topic = args["topics"][0].as_str().unwrap();
    let replication = args["replication"].as_i64().unwrap() as i16;
    let base = args["base_millis"].as_i64().unwrap();
    controller.create_topic(topic, 1, replication, 5_000).await.expect("create");
    let again = controller.create_topic(topic, 1, replication, 5_000).await.expect_err("create again");
    let two = controller.create_topic(format!("{topic}-two"), 2, replication, 5_000).await.expect_err("2 partitions");
    let partition = partition(client, topic).await;
    partition.produce((0..10).map(|i| record(i, base)).collect(), Compression::NoCompression).await.expect("produce");
    let earliest = partition.get_offset(OffsetAt::Earliest).await.expect("earliest");
    let latest = partition.get_offset(OffsetAt::Latest).await.expect("latest");
    let by_time = partition.get_offset(OffsetAt::Timestamp(Utc.timestamp_millis_opt(base + 5).unwrap()))
        .await.expect("by time");
    partition.delete_records(3, 5_000).await.expect("delete records");
    let earliest_after_delete = partition.get_offset(OffsetAt::Earliest).await.expect("earliest");
    let after_delete: Vec<Value> = read_all(client, topic, 3, 10).await.iter().map(|r| r["offset"].clone()).collect();
    controller.delete_topic(topic, 5_000).await.expect("delete");
    tokio::time::timeout(Duration::from_secs(30), async {
        while client.list_topics().await.expect("list").iter().any(|t| t.name == topic) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }).await.expect("the deleted stream still in Metadata after 30 s");
    json!({"create_again": again.to_string(), "two_partitions": two.to_string(), "earliest": earliest,
           "latest": latest, "by_time": by_time, "earliest_after_delete": earliest_after_delete,
           "offsets_after_delete": after_delete})
}

#[tokio::main]
async fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let (scenario, args): (&str, Value) = match argv.as_slice() {
        [_, scenario, args] => (scenario, serde_json::from_str(args).expect("JSON-ARGS")),
        _ => panic!("usage: vdl-rskafka SCENARIO JSON-ARGS; SCENARIO one of produce, admin"),
    };
    let bootstrap = args["bootstrap"].as_array().unwrap().iter().map(|b| b.as_str().unwrap().to_string()).collect();
    let client = ClientBuilder::new(bootstrap).build().await.expect("connect");
    let result = match scenario {
        "produce" => produce(&client, &args).await,
        "admin" => admin(&client, &args).await,
        other => panic!("unknown scenario {other}"),
    };
    println!("{}", json!({"result": result}));
}
