//! Built-in agents, embedded. (Stub: implemented by the catalog work.)
