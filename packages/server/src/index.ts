// `sandtree serve` asks again (a cached verdict) to say which accelerator it runs on and why.
// `sandtree worker` joins a control plane through the same lazily loaded module.
export { detectAccel, type RunWorkerOptions, runWorker } from "@sandtree/host";
export { buildApp, VERSION } from "./app.js";
export { type FleetWorkerOptions, type RunningFleetWorker, startFleetWorker } from "./fleet-worker.js";
export { runServer } from "./run-server.js";
export { type RunningServer, ServerConfig, type ServerConfigInput, startServer } from "./server.js";
export type { ImageResolver, ImageSummary, ResolvedImage } from "./services/images/image-resolver.js";
export { type Clock, ManualClock, systemClock } from "./services/metering/clock.js";
export { PriceEntry, PriceTable } from "./services/metering/prices.js";
export { openStore } from "./store/open-store.js";
export { PgStore } from "./store/pg-store.js";
export { SqliteStore } from "./store/sqlite-store.js";
export type { Store } from "./store/store.js";
