// The remote host (docs/architecture.md, "The remote host"): a MachineHost over the network
// (connectRemoteHost, the control plane's half) and the service a worker runs over its own host
// (serveMachineHost, the worker's half).
export { connectRemoteHost, RemoteHost, type RemoteHostOptions } from "./remote/remote-host.js";
export { RemoteMachine } from "./remote/remote-machine.js";
export { type ServedHost, type ServeHostOptions, serveMachineHost } from "./remote/serve-host.js";
