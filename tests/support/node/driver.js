'use strict'
// kafkajs driven by tests/integration/test_node_clients.py.
//
// Usage: node driver.js SCENARIO 'JSON-ARGS'. One scenario per run; progress lines
// ({"progress": ...}) and one result line ({"result": ...}) as JSON on stdout, or {"error": ...}
// and exit 1. Results are deterministic (offsets, keys, values, headers, timestamps as the broker
// returned them; sorted where order is free), so the test compares them exactly.

const fs = require('fs')
const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
// kafkajs has no lz4 or zstd of its own (only native add-ons): none, gzip and snappy here.
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }

const emit = (kind, value) => process.stdout.write(JSON.stringify({ [kind]: value }) + '\n')

function kafkaOf (args) {
  const config = {
    clientId: 'vdl-kafkajs',
    brokers: args.bootstrap,
    logLevel: process.env.VDL_KAFKAJS_LOG ? logLevel.DEBUG : logLevel.NOTHING,
    retry: { retries: args.retries ?? 10, initialRetryTime: 100, maxRetryTime: 2000 },
  }
  if (args.user) {
    config.ssl = { ca: [fs.readFileSync(args.ca, 'utf-8')] }
    config.sasl = { mechanism: 'scram-sha-512', username: args.user, password: args.password }
  }
  return new Kafka(config)
}

// Record i of a scenario: every third without a key, two headers (one empty), timestamp base+i.
function makeMessage (i, base) {
  return {
    key: i % 3 ? `key-${i}` : null,
    value: `value-${i}-` + 'x'.repeat(i % 7),
    headers: { i: String(i), empty: '' },
    timestamp: String(base + i),
  }
}

function toRecord (topic, m) {
  const headers = Object.entries(m.headers || {}).map(([k, v]) => [k, v.toString()])
  return {
    topic,
    offset: Number(m.offset),
    key: m.key === null ? null : m.key.toString(),
    value: m.value.toString(),
    headers,
    timestamp: Number(m.timestamp),
  }
}

async function createTopics (args, admin, topics, configEntries = []) {
  return admin.createTopics({
    topics: topics.map(topic => ({ topic, numPartitions: 1, replicationFactor: args.replication, configEntries })),
  })
}

// kafkajs 2.x races a rebalance that completes against its own running fetch loop (the offsets
// it fetches from are rebuilt under it) and stops that consumer for good with a TypeError, no
// retry: tulios/kafkajs#1366. Recorded here, it ends the scenario at once, named, so the test
// can tell this client defect from anything the broker did.
const KAFKAJS_RACE = 'kafkajs rebalance race (tulios/kafkajs#1366)'
let clientRace = null

// Resolves once `done()` (maybe async) holds, checked every 20 ms, or rejects naming `what` at
// the deadline.
async function until (what, done, seconds = 60) {
  const deadline = Date.now() + seconds * 1000
  while (!(await done())) {
    if (clientRace !== null) throw new Error(`${what}: ${KAFKAJS_RACE}: ${clientRace}`)
    if (Date.now() > deadline) throw new Error(`${what}: not done before the deadline`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

// `count` records from the start of the topics, by a consumer of a group of its own.
async function readAll (args, kafka, topics, count, readUncommitted = false) {
  const consumer = kafka.consumer({
    groupId: `vdl-kafkajs-reader-${Math.random().toString(16).slice(2)}`, readUncommitted,
    sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 100,
  })
  await consumer.connect()
  const got = []
  try {
    await consumer.subscribe({ topics, fromBeginning: true })
    await consumer.run({ autoCommit: false, eachMessage: async ({ topic, message }) => { got.push(toRecord(topic, message)) } })
    await until(`read ${count} records from ${topics}`, () => got.length >= count)
  } finally {
    await consumer.disconnect()
  }
  return got.sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.offset - b.offset))
}

// produce: a stream per codec (topics[i] for codecs[i]), `count` records each from an idempotent
// acks=all producer, then read back from the start.
async function produce (args) {
  const kafka = kafkaOf(args)
  const admin = kafka.admin()
  await admin.connect()
  await createTopics(args, admin, args.topics)
  await admin.disconnect()
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const acked = {}
  for (const [i, codec] of args.codecs.entries()) {
    const messages = Array.from({ length: args.count }, (_, j) => makeMessage(j, args.base_millis))
    // Two sends per codec: the second's base offset is the first's count.
    const half = Math.floor(args.count / 2)
    acked[codec] = []
    for (const part of [messages.slice(0, half), messages.slice(half)]) {
      const [result] = await producer.send({ topic: args.topics[i], messages: part, acks: -1, compression: CODECS[codec] })
      acked[codec].push(Number(result.baseOffset))
    }
  }
  await producer.disconnect()
  // One reader for every stream (a consumer's join costs a good part of a second).
  const all = await readAll(args, kafka, args.topics, args.count * args.codecs.length)
  const records = {}
  for (const [i, codec] of args.codecs.entries()) records[codec] = all.filter(r => r.topic === args.topics[i])
  emit('result', { acked, records })
}

// Tells the test how many records are acked and waits for its go-ahead (a line on stdin).
function pause (acked) {
  emit('progress', acked)
  return new Promise(resolve => process.stdin.once('data', () => { process.stdin.pause(); resolve() }))
}

// kill-leader: an idempotent producer of `count` records in sends of 10, one at a time; after
// `pause_at` acked, a pause for the test to kill the stream's leader; then all read back.
async function killLeader (args) {
  const kafka = kafkaOf(args)
  const admin = kafka.admin()
  await admin.connect()
  await createTopics(args, admin, args.topics)
  await admin.disconnect()
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  for (let i = 0; i < args.count; i += 10) {
    const messages = Array.from({ length: 10 }, (_, j) => makeMessage(i + j, args.base_millis))
    await producer.send({ topic: args.topics[0], messages, acks: -1 })
    if (i + 10 === args.pause_at) await pause(args.pause_at)
  }
  await producer.disconnect()
  emit('result', { records: await readAll(args, kafka, args.topics, args.count) })
}

const offsetsOf = records => {
  const out = {}
  for (const r of records) (out[r.topic] = out[r.topic] || []).push(r.offset)
  return out
}

// A group member that commits what it read after each message; `assigned` is what the group last
// gave it (its GROUP_JOIN event).
async function member (kafka, args, got) {
  const consumer = kafka.consumer({ groupId: args.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 100, rebalanceTimeout: 10000 })
  const state = { consumer, assigned: [], joins: 0 }
  consumer.on(consumer.events.CRASH, e => {
    const message = e.payload.error.message
    if (!e.payload.restart && /^Cannot (read|set) properties of undefined/.test(message)) clientRace = message
  })
  consumer.on(consumer.events.GROUP_JOIN, e => {
    state.assigned = Object.keys(e.payload.memberAssignment).filter(t => e.payload.memberAssignment[t].length).sort()
    state.joins++
  })
  await consumer.connect()
  await consumer.subscribe({ topics: args.topics, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      got.push(toRecord(topic, message))
      await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
    },
  })
  return state
}

// groups: as franz-go's: one member reads `count` per stream and leaves (committed); two join
// and split the streams; four records more per stream, each read by its member only; one leaves
// and the other takes every stream and its next record.
async function groups (args) {
  const kafka = kafkaOf(args)
  const admin = kafka.admin()
  await admin.connect()
  await createTopics(args, admin, args.topics)
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const produceEach = async (from, to) => {
    for (const topic of args.topics) {
      const messages = []
      for (let i = from; i < to; i++) messages.push(makeMessage(i, args.base_millis))
      await producer.send({ topic, messages, acks: -1 })
    }
  }
  await produceEach(0, args.count)
  const total = args.topics.length * args.count
  const firstGot = []
  const first = await member(kafka, args, firstGot)
  await until('first member', () => firstGot.length >= total)
  await first.consumer.disconnect()

  const got = [[], []]
  const two = [await member(kafka, args, got[0]), await member(kafka, args, got[1])]
  await until('two members assigned', () => two[0].assigned.length > 0 && two[1].assigned.length > 0 &&
    two[0].assigned.length + two[1].assigned.length === args.topics.length)
  const early = [got[0].slice(), got[1].slice()]
  const assigned = [two[0].assigned, two[1].assigned]
  await produceEach(args.count, args.count + 4)
  await until('two members', () => got[0].length + got[1].length - early[0].length - early[1].length >= 4 * args.topics.length)
  const twoRead = [offsetsOf(got[0].slice(early[0].length)), offsetsOf(got[1].slice(early[1].length))]
  const [described] = (await admin.describeGroups([args.group])).groups
  await two[1].consumer.disconnect()

  await until('the other member left', () => two[0].assigned.length === args.topics.length)
  const before = got[0].length
  await produceEach(args.count + 4, args.count + 5)
  await until('one member', () => got[0].length - before >= args.topics.length)
  const lastRead = offsetsOf(got[0].slice(before))
  await two[0].consumer.disconnect()
  const committed = {}
  // One stream per fetchOffsets: for several, kafkajs adds each to its admin's topics and
  // refreshes its metadata concurrently (src/admin/index.js findTopicPartitions), and on three
  // nodes these refreshes go to different brokers and may land out of order: an older one, asked
  // before the last stream was added, then replaces the cache and that stream is fetched with no
  // partition at all (every node answered every stream with its partition).
  for (const topic of args.topics) {
    const [t] = await admin.fetchOffsets({ groupId: args.group, topics: [topic] })
    committed[t.topic] = Number(t.partitions[0].offset)
  }
  await producer.disconnect()
  await admin.disconnect()
  emit('result', {
    first_read: offsetsOf(firstGot),
    early,
    two_assigned: assigned,
    two_read: twoRead,
    last_read: lastRead,
    committed,
    described: { state: described.state, members: described.members.length, protocol_type: described.protocolType, protocol: described.protocol },
  })
}

// admin: create (and again), describe configs, offsets (start, end, by time), a group's offsets
// set and described, delete (and again).
async function adminScenario (args) {
  const kafka = kafkaOf(args)
  const admin = kafka.admin()
  await admin.connect()
  const out = {}
  const topic = args.topics[0]
  out.created = await createTopics(args, admin, args.topics, [{ name: 'retention.ms', value: '86400000' }])
  out.created_again = await createTopics(args, admin, [topic])
  const described = await admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }] })
  out.configs = {}
  for (const entry of described.resources[0].configEntries) {
    if (['retention.ms', 'segment.ms', 'max.message.bytes'].includes(entry.configName)) {
      out.configs[entry.configName] = `${entry.configValue}/${entry.isDefault ? 'default' : 'set'}`
    }
  }
  out.describe_error = described.resources[0].errorCode
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  await producer.send({
    topic, acks: -1, messages: Array.from({ length: 5 }, (_, i) => makeMessage(i, args.base_millis + i * 999)),
  })
  await producer.disconnect()
  const [offsets] = await admin.fetchTopicOffsets(topic)
  const [third] = await admin.fetchTopicOffsetsByTimestamp(topic, args.base_millis + 2000)
  const [past] = await admin.fetchTopicOffsetsByTimestamp(topic, args.base_millis + 10000)
  out.offsets = { start: Number(offsets.low), end: Number(offsets.high), after_third: Number(third.offset), after_all: Number(past.offset) }
  // A group nobody joined or committed to (kafkajs' setOffsets runs a consumer for seconds):
  // DescribeGroups says Dead, OffsetFetch -1.
  const [fetched] = await admin.fetchOffsets({ groupId: args.group, topics: [topic] })
  const { groups: [group] } = await admin.describeGroups([args.group])
  out.group = { state: group.state, members: group.members.length, error: group.errorCode, committed: Number(fetched.partitions[0].offset) }
  out.deleted = await admin.deleteTopics({ topics: args.topics }).then(() => 'OK', e => e.type || e.message)
  // kafkajs retries UNKNOWN_TOPIC_OR_PARTITION (retriable in Kafka) for its whole retry budget:
  // a client that does not retry asks once.
  const once = kafkaOf({ ...args, retries: 0 }).admin()
  await once.connect()
  out.deleted_again = await once.deleteTopics({ topics: [topic] }).then(() => 'OK', e => (e.cause || e).type || e.message)
  await once.disconnect()
  // Any node may answer the listing: like Kafka's brokers, they learn of the delete within
  // moments of its answer, not all before it.
  out.remaining = args.topics
  await until('the deleted topics unlisted', async () => {
    const listed = await admin.listTopics()
    out.remaining = args.topics.filter(t => listed.includes(t))
    return !out.remaining.length
  }, 10).catch(() => {})
  await admin.disconnect()
  emit('result', out)
}

// transactions: committed, aborted, committed again into topics[0]; read_committed and
// read_uncommitted readers; then a consume-transform-produce copy to topics[1] whose offsets go
// in its transaction (sendOffsets).
async function transactions (args) {
  const kafka = kafkaOf(args)
  const admin = kafka.admin()
  await admin.connect()
  await createTopics(args, admin, args.topics)
  const [source, copy] = args.topics
  const producer = kafka.producer({ transactionalId: args.txn_id, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  let n = 0
  for (const [count, commit] of [[3, true], [2, false], [1, true]]) {
    const txn = await producer.transaction()
    const messages = Array.from({ length: count }, () => makeMessage(n++, args.base_millis))
    await txn.send({ topic: source, messages, acks: -1 })
    await (commit ? txn.commit() : txn.abort())
  }
  const committed = await readAll(args, kafka, [source], 4)
  const uncommitted = await readAll(args, kafka, [source], 6, true)

  const consumer = kafka.consumer({ groupId: args.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topics: [source], fromBeginning: true })
  let copied = 0
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (!batch.messages.length) return
      const txn = await producer.transaction()
      await txn.send({
        topic: copy, acks: -1,
        messages: batch.messages.map(m => ({ key: m.key, value: 'copy-' + m.value.toString(), headers: m.headers, timestamp: m.timestamp })),
      })
      const next = String(Number(batch.messages[batch.messages.length - 1].offset) + 1)
      await txn.sendOffsets({ consumerGroupId: args.group, topics: [{ topic: source, partitions: [{ partition: 0, offset: next }] }] })
      await txn.commit()
      copied += batch.messages.length
    },
  })
  await until('copy', () => copied >= 4)
  await consumer.disconnect()
  await producer.disconnect()
  const [offsets] = await admin.fetchOffsets({ groupId: args.group, topics: [source] })
  await admin.disconnect()
  emit('result', {
    read_committed: committed,
    read_uncommitted: uncommitted,
    copied: await readAll(args, kafka, [copy], 4),
    group_offsets: { [source]: Number(offsets.partitions[0].offset) },
  })
}

const SCENARIOS = { produce, 'kill-leader': killLeader, groups, admin: adminScenario, transactions }

async function main () {
  const [scenario, json] = process.argv.slice(2)
  const run = SCENARIOS[scenario]
  if (!run || json === undefined) {
    throw new Error(`usage: node driver.js SCENARIO JSON-ARGS; SCENARIO one of ${Object.keys(SCENARIOS).join(', ')}`)
  }
  await run(JSON.parse(json))
}

main().then(() => process.exit(0), e => {
  emit('error', `${e.name}: ${e.message}` + (e.type ? ` (${e.type})` : '') + (e.stack ? `\n${e.stack}` : ''))
  process.exit(1)
})
