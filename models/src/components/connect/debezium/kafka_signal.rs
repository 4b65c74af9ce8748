//! The Kafka signal channel as the task reads it (reference debezium-postgres.md §6.1,
//! Debezium's `KafkaSignalChannel` and `SignalProcessor`). The consumer itself (its group read,
//! fetches and auto-commits) is the Connect worker's, which holds the task's Kafka clients; what
//! it returns reaches the task here, one record at a time, on the SignalProcessor's thread:
//!
//! - `processSignal`: a record whose key is not the connector's `topic.prefix` is logged ("Signal
//!   key '…' doesn't match the connector's name '…'") and dropped.
//! - The action runs as `SignalProcessor.process` runs it, outside the streaming thread: an
//!   `execute-snapshot` that starts an incremental snapshot runs its first `readChunk` there,
//!   while the stream goes on (a window opened by its watermark before its chunk query has
//!   answered finds an empty buffer); a source signal read meanwhile waits for the semaphore
//!   (`streaming.rs`). A blocking snapshot's pause is noticed by the streaming loop at its next
//!   iteration, idle or not: at once here when the stream waits for messages.
//! - The SignalProcessor starts once streaming is initialized (DBZ-7441, 2.6): a record that
//!   comes before, or while the streaming thread is in `readChunk` or a blocking snapshot, or
//!   while the processor's thread is still in the `readChunk` an earlier record started, waits
//!   for the next poll.

use super::*;
use crate::core::signal::SignalVia;

/// What became of a Kafka signal record handed to the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaSignalOutcome {
    /// Read (executed, or skipped for its key): the next one may come.
    Read,
    /// Not now (streaming not begun, or the streaming thread busy): offer it again at the next
    /// poll.
    Wait,
}

impl DebeziumTask {
    /// Record `offset` of the Kafka signal topic, whose key in the model is `number` (the
    /// signal's place + 1 on its topic).
    pub fn on_kafka_signal(&mut self, ctx: &mut Ctx, offset: u64, number: Key) -> KafkaSignalOutcome {
        let Some(kafka) = self.config.signalling.as_ref().and_then(|signalling| signalling.kafka.as_ref()) else {
            return KafkaSignalOutcome::Read;
        };
        // `awaits_chunk_reply` with no stall: the processor's own thread is still in the
        // `readChunk` an earlier record started.
        if !self.is_streaming() || self.stalled.is_some() || self.awaits_chunk_reply() || self.in_blocking_snapshot() {
            return KafkaSignalOutcome::Wait;
        }
        let topic = kafka.topic;
        let Some(entry) = usize::try_from(number - 1).ok().and_then(|index| kafka.signals.get(index)).cloned() else {
            return KafkaSignalOutcome::Read;
        };
        if entry.origin == 0 {
            ctx.observe(Observation::KafkaSignalSkipped {
                topic,
                offset,
                key: entry.key,
                prefix: self.config.topic_prefix.clone(),
            });
            return KafkaSignalOutcome::Read;
        }
        self.execute_signal(ctx, Key::from(entry.origin), SignalVia(Some(topic)));
        // The streaming loop checks `isPaused()` at every iteration: waiting for messages, it
        // pauses now.
        if self.blocking_request.is_some() && self.stalled.is_none() && !self.in_read_chunk() {
            self.blocking_pause_requested(ctx);
        }
        KafkaSignalOutcome::Read
    }
}
