import { HostList, HostStateChange } from "@sandtree/protocol";
import type { HttpClient, RequestOptions } from "./http.js";

/** Fleet hosts (admin keys): list them, cordon, drain, uncordon. */
export class Hosts {
  constructor(private readonly http: HttpClient) {}

  /** Every host with its state, capacity and usage. */
  async list(options: RequestOptions = {}): Promise<HostList["hosts"]> {
    return (await this.http.json(HostList, { ...options, method: "GET", path: "/v1/hosts" })).hosts;
  }

  /** No new work for the host; its sandboxes stay. */
  cordon(name: string, options: RequestOptions = {}): Promise<HostStateChange> {
    return this.change(name, "cordon", options);
  }

  /** Cordons the host; its sandboxes stay until they end (the answer counts them). */
  drain(name: string, options: RequestOptions = {}): Promise<HostStateChange> {
    return this.change(name, "drain", options);
  }

  uncordon(name: string, options: RequestOptions = {}): Promise<HostStateChange> {
    return this.change(name, "uncordon", options);
  }

  private change(name: string, verb: string, options: RequestOptions): Promise<HostStateChange> {
    return this.http.json(HostStateChange, {
      ...options,
      method: "POST",
      path: `/v1/hosts/${encodeURIComponent(name)}/${verb}`,
    });
  }
}
