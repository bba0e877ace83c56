export * from "./errors.js";
export * from "./exec.js";
export * from "./files.js";
export * from "./guest-frames.js";
export * from "./images.js";
export * from "./sandbox.js";
