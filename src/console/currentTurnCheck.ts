import { newestDurableTurnId, type DurableTurn } from '../turns/index.js';

/** The current turn as the browser resolves it from a session's visible turns, beside the server's. */
export interface CurrentTurnCheck {
  /** What `newestDurableTurnId` resolved: null when no conversational turn is visible. */
  browser: string | null;
  server: string | null;
  agree: boolean;
}

/** Resolves the current turn with the same rule a UI uses, and says whether the server agrees (it must). */
export function checkCurrentTurn(turns: readonly DurableTurn[], serverCurrentTurnId: string | null): CurrentTurnCheck {
  const browser = newestDurableTurnId(turns) ?? null;
  return { browser, server: serverCurrentTurnId, agree: browser === serverCurrentTurnId };
}
