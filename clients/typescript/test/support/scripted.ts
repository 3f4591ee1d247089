/** The scripted model and a lossy proxy to contextd, started before a test file's tests
 * and stopped after them (most adapter tests need both). */
import { after, before } from "node:test";
import { ScriptedModel } from "../../examples/scripted-model.js";
import { LossyProxy } from "./proxy.js";
import { contextdUrl } from "./server.js";

export function scriptedModelAndProxy(): { model: ScriptedModel; proxy: LossyProxy } {
  const model = new ScriptedModel();
  const proxy = new LossyProxy(contextdUrl());
  before(async () => {
    await model.start();
    await proxy.start();
  });
  after(async () => {
    await model.stop();
    await proxy.stop();
  });
  return { model, proxy };
}
