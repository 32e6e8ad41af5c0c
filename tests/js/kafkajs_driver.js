// Drives kafkajs for the integration tests: `node kafkajs_driver.js COMMAND BROKER 'JSON'`.
// Each command prints one JSON object on stdout; errors exit with status 1 and the
// kafkajs error (type, message) on stderr. Values travel base64-encoded so binary data
// round-trips exactly.
'use strict'
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

function client(broker, id) {
  return new Kafka({ clientId: id || 'ads-tests', brokers: [broker], logLevel: logLevel.WARN,
    retry: { retries: 8, initialRetryTime: 100 } })
}

async function produce(kafka, args) {
  const producer = kafka.producer({ idempotent: !!args.idempotent, allowAutoTopicCreation: false,
    maxInFlightRequests: args.idempotent ? 1 : undefined })
  await producer.connect()
  try {
    const messages = args.messages.map((m) => ({
      key: unb64(m.key), value: unb64(m.value), partition: m.partition,
      headers: Object.fromEntries(Object.entries(m.headers || {}).map(([k, v]) => [k, unb64(v)])),
      timestamp: m.timestamp === undefined ? undefined : String(m.timestamp),
    }))
    const acks = args.acks === undefined ? -1 : args.acks
    const compression = CompressionTypes[(args.compression || 'none').toUpperCase()]
    const results = []
    for (let i = 0; i < messages.length; i += args.batch || messages.length) {
      const part = messages.slice(i, i + (args.batch || messages.length))
      results.push(...await producer.send({ topic: args.topic, messages: part, acks, compression }))
    }
    return { results }
  } finally {
    await producer.disconnect()
  }
}

async function consume(kafka, args) {
  const consumer = kafka.consumer({ groupId: args.group, maxWaitTimeInMs: 200,
    sessionTimeout: args.sessionTimeout || 10000, heartbeatInterval: 500 })
  await consumer.connect()
  const records = []
  try {
    await consumer.subscribe({ topics: [args.topic], fromBeginning: args.fromBeginning !== false })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(), args.timeoutMs || 20000)
      consumer.run({
        autoCommit: args.autoCommit !== false,
        eachMessage: async ({ partition, message }) => {
          records.push({
            partition, offset: Number(message.offset), key: b64(message.key),
            value: b64(message.value), timestamp: Number(message.timestamp),
            headers: Object.fromEntries(Object.entries(message.headers || {}).map(
              ([k, v]) => [k, b64(v)])),
          })
          if (records.length >= args.count) { clearTimeout(timer); resolve() }
        },
      }).catch(reject)
    })
    if (args.commitBeforeStop !== false) {
      // eachMessage marks offsets; stopping commits them (autoCommit) before leaving.
      await consumer.stop()
    }
  } finally {
    await consumer.disconnect()
  }
  return { records }
}

async function groupPair(kafka, args) {
  // Two members of one group: each must end up with a share of the partitions.
  const make = () => kafka.consumer({ groupId: args.group, maxWaitTimeInMs: 200,
    heartbeatInterval: 300, sessionTimeout: 10000, rebalanceTimeout: 10000 })
  const members = [make(), make()]
  const assigned = [[], []]
  const seen = new Set()
  let settled = null
  try {
    for (const [i, c] of members.entries()) {
      await c.connect()
      c.on(c.events.GROUP_JOIN, (e) => { assigned[i] = e.payload.memberAssignment[args.topic] || [] })
      await c.subscribe({ topics: [args.topic], fromBeginning: true })
      await c.run({ eachMessage: async ({ partition, message }) => {
        seen.add(`${partition}:${message.offset}`)
      } })
    }
    const deadline = Date.now() + (args.timeoutMs || 30000)
    while (Date.now() < deadline) {
      const total = assigned[0].length + assigned[1].length
      if (assigned[0].length > 0 && assigned[1].length > 0 && total === args.partitions &&
          seen.size >= args.count) {
        // A snapshot: leaving below makes the other member take every partition.
        settled = assigned.map((a) => [...a].sort())
        break
      }
      await new Promise((r) => setTimeout(r, 100))
    }
  } finally {
    for (const c of members) await c.disconnect()
  }
  return { assigned: settled || assigned, seen: seen.size }
}

async function admin(kafka, args) {
  const a = kafka.admin()
  await a.connect()
  const out = {}
  try {
    const t = args.topic
    out.created = await a.createTopics({ topics: [{ topic: t, numPartitions: 2,
      configEntries: [{ name: 'retention.ms', value: '3600000' }] }], waitForLeaders: true })
    out.createdAgain = await a.createTopics({ topics: [{ topic: t, numPartitions: 2 }] })
    out.listed = (await a.listTopics()).includes(t)
    const md = await a.fetchTopicMetadata({ topics: [t] })
    out.partitions = md.topics[0].partitions.map((p) => p.partitionId).sort()
    const producer = kafka.producer(); await producer.connect()
    await producer.send({ topic: t, messages: Array.from({ length: 10 }, (_, i) => (
      { value: `v${i}`, partition: i % 2, timestamp: String(1700000000000 + i * 1000) })) })
    await producer.disconnect()
    out.offsets = (await a.fetchTopicOffsets(t)).sort((x, y) => x.partition - y.partition)
    out.byTimestamp = (await a.fetchTopicOffsetsByTimestamp(t, 1700000004000))
      .sort((x, y) => x.partition - y.partition)
    const cfg = await a.describeConfigs({ includeSynonyms: false,
      resources: [{ type: 2, name: t, configNames: ['retention.ms', 'cleanup.policy'] }] })
    out.configs = Object.fromEntries(cfg.resources[0].configEntries.map(
      (e) => [e.configName, e.configValue]))
    await a.alterConfigs({ validateOnly: false, resources: [{ type: 2, name: t,
      configEntries: [{ name: 'retention.ms', value: '7200000' }] }] })
    const after = await a.describeConfigs({ includeSynonyms: false,
      resources: [{ type: 2, name: t, configNames: ['retention.ms'] }] })
    out.retentionAfter = after.resources[0].configEntries[0].configValue
    await a.createPartitions({ topicPartitions: [{ topic: t, count: 3 }] })
    out.partitionsAfter = (await a.fetchTopicMetadata({ topics: [t] })).topics[0].partitions.length
    await a.deleteTopicRecords({ topic: t, partitions: [{ partition: 0, offset: '2' }] })
    out.afterDelete = (await a.fetchTopicOffsets(t)).find((p) => p.partition === 0)
    const cluster = await a.describeCluster()
    out.brokers = cluster.brokers.length
    await a.deleteTopics({ topics: [t] })
    out.listedAfterDelete = (await a.listTopics()).includes(t)
  } finally {
    await a.disconnect()
  }
  return out
}

async function groupAdmin(kafka, args) {
  const a = kafka.admin()
  await a.connect()
  const out = {}
  try {
    out.listed = (await a.listGroups()).groups.map((g) => g.groupId).sort()
    const described = await a.describeGroups([args.group])
    out.state = described.groups[0].state
    out.protocolType = described.groups[0].protocolType
    out.offsets = (await a.fetchOffsets({ groupId: args.group, topics: [args.topic] }))[0]
      .partitions.sort((x, y) => x.partition - y.partition)
    await a.setOffsets({ groupId: args.group, topic: args.topic,
      partitions: [{ partition: 0, offset: '1' }] })
    out.afterSet = (await a.fetchOffsets({ groupId: args.group, topics: [args.topic] }))[0]
      .partitions.find((p) => p.partition === 0)
    await a.resetOffsets({ groupId: args.group, topic: args.topic, earliest: true })
    out.afterReset = (await a.fetchOffsets({ groupId: args.group, topics: [args.topic] }))[0]
      .partitions.map((p) => p.offset)
  } finally {
    await a.disconnect()
  }
  return out
}

async function deleteGroup(kafka, args) {
  const a = kafka.admin()
  await a.connect()
  try {
    const deleted = await a.deleteGroups([args.group])
    const listed = (await a.listGroups()).groups.map((g) => g.groupId)
    return { deleted, listed }
  } finally {
    await a.disconnect()
  }
}

async function transaction(kafka, args) {
  // One transactional producer: each step of args.steps is a transaction of messages to
  // commit or abort; with args.offsets, the consumer offsets {topic, partition, offset} of
  // group args.group are sent in the last transaction.
  const producer = kafka.producer({ transactionalId: args.transactionalId, idempotent: true,
    maxInFlightRequests: 1, transactionTimeout: args.transactionTimeout || 30000 })
  await producer.connect()
  try {
    for (const [i, step] of args.steps.entries()) {
      const txn = await producer.transaction()
      await txn.send({ topic: args.topic, messages: step.messages.map((m) => ({
        value: unb64(m.value), partition: m.partition })) })
      if (args.offsets && i === args.steps.length - 1) {
        await txn.sendOffsets({ consumerGroupId: args.group, topics: [{ topic: args.offsets.topic,
          partitions: args.offsets.partitions.map((p) => ({ partition: p.partition,
            offset: String(p.offset) })) }] })
      }
      if (step.commit) await txn.commit()
      else await txn.abort()
    }
    return { steps: args.steps.length }
  } finally {
    await producer.disconnect()
  }
}

async function readCommitted(kafka, args) {
  // A read_committed consumer (kafkajs's default isolation) of every partition.
  const consumer = kafka.consumer({ groupId: args.group, maxWaitTimeInMs: 200,
    readUncommitted: !!args.readUncommitted })
  await consumer.connect()
  const values = []
  try {
    await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(), args.timeoutMs || 15000)
      consumer.run({ autoCommit: false, eachMessage: async ({ message }) => {
        values.push(b64(message.value))
        if (values.length >= args.count) { setTimeout(() => { clearTimeout(timer); resolve() }, 1000) }
      } }).catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
  return { values }
}

const COMMANDS = { produce, consume, 'group-pair': groupPair, admin, 'group-admin': groupAdmin,
  'delete-group': deleteGroup, transaction, 'read-committed': readCommitted }

async function main() {
  const [command, broker, json] = process.argv.slice(2)
  const fn = COMMANDS[command]
  if (!fn) throw new Error(`unknown command ${command}`)
  const result = await fn(client(broker), JSON.parse(json || '{}'))
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().then(() => process.exit(0)).catch((e) => {
  process.stderr.write(`kafkajs error: ${e.name}: ${e.message}\n`)
  process.exit(1)
})
