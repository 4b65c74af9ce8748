//! The components: one modelled process each, every one a [`crate::core::component::Component`].
//!
//! A component imports only the core layer ([`crate::core`]): it talks to the others through
//! the messages of [`crate::core::protocol`], never by calling them. The Debezium connector is
//! part of the Connect component ([`connect::debezium`]): it is the plugin the worker runs.

pub mod app;
pub mod connect;
pub mod consumer;
pub mod kafka;
pub mod loader;
pub mod operator;
pub mod postgres;
pub mod sink;
