//! Tributary writer: bucket routing, the Hudi log format and the write client.
