// Chromium aborts every request in flight with net::ERR_NETWORK_CHANGED when a network interface
// comes or goes on the host. Docker makes one (a veth) for every container it starts, and CI's
// container lane starts dozens beside jest. Chromium has no switch to ignore them
// (https://issues.chromium.org/issues/41465264), so a test that drives it says what to do instead:
// a plain navigation goes again; a scenario whose counts an aborted request would skew runs again
// from its start, with fresh state. Any other failure fails the test as before.
import { readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BrowserContext, Page, Response } from 'playwright-core';

const NETWORK_CHANGED = 'net::ERR_NETWORK_CHANGED';
const ATTEMPTS = 4;
/** Docker starts a compose project's containers over a few seconds: go again once that burst is over. */
const QUIET_MS = 3000;
const MAX_SETTLE_MS = 60_000;

/** Resolves once the host's network interfaces have stayed the same for QUIET_MS (or after MAX_SETTLE_MS). */
export async function networkSettled(): Promise<void> {
  const interfaces = () => readdirSync('/sys/class/net').sort().join(' ');
  const deadline = Date.now() + MAX_SETTLE_MS;
  let last = interfaces();
  let quietSince = Date.now();
  while (Date.now() - quietSince < QUIET_MS && Date.now() < deadline) {
    await sleep(250);
    const now = interfaces();
    if (now !== last) [last, quietSince] = [now, Date.now()];
  }
}

export function isNetworkChange(error: unknown): boolean {
  return error instanceof Error && error.message.includes(NETWORK_CHANGED);
}

/** `page.goto`, again (up to 4 times in all) when Chromium aborted it for a network change, once the network settles. */
export async function gotoSteady(page: Page, url: string, options?: Parameters<Page['goto']>[1]): Promise<Response | null> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await page.goto(url, options);
    } catch (error) {
      if (!isNetworkChange(error) || attempt >= ATTEMPTS) throw error;
      await networkSettled();
    }
  }
}

/** Records whether any request of the pages or contexts it watches was aborted for a network change. */
export class NetworkChangeWatch {
  changed = false;
  watch<T extends Page | BrowserContext>(target: T): T {
    (target as Page).on('requestfailed', (request) => {
      if (request.failure()?.errorText.includes(NETWORK_CHANGED)) this.changed = true;
    });
    return target;
  }
}

/**
 * Runs `scenario`; when it fails and a network change aborted one of its requests, runs it again from
 * the start (up to 4 times in all), once the network has settled. The scenario must build its own state (servers, contexts), so
 * that each run's assertions stay exact.
 */
export async function rerunOnNetworkChange<T>(scenario: (watch: NetworkChangeWatch) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const watch = new NetworkChangeWatch();
    try {
      return await scenario(watch);
    } catch (error) {
      if (!(watch.changed || isNetworkChange(error)) || attempt >= ATTEMPTS) throw error;
      console.warn(`a network change aborted a request of the scenario (attempt ${attempt}): running it again from the start once the network settles`);
      await networkSettled();
    }
  }
}
