/** The summary as published: semantic fields plus revision and updated_at. */
export interface PublishedSummary extends Record<string, unknown> {
  revision: number;
  updated_at: string;
}
