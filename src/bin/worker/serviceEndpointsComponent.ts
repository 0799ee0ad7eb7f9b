import { startServiceEndpoints, type ServiceEndpointsOptions } from '../../events/serviceEndpoints.js';
import type { WorkerComponent } from './component.js';

/** The request/reply endpoints as a worker component: the one place the worker starts them. */
export function serviceEndpointsComponent(options: ServiceEndpointsOptions): WorkerComponent {
  let endpoints: Awaited<ReturnType<typeof startServiceEndpoints>> | undefined;
  return {
    name: 'service-endpoints',
    async start() {
      endpoints = await startServiceEndpoints(options);
    },
    stop: async () => endpoints?.stop(),
  };
}
