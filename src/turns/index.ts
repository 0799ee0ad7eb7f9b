/** Dependency-free rules shared with UI clients. Imports nothing outside this folder. */
export * from './lifecycleTurn.js';
export * from './liveClarification.js';
export * from './newestDurableTurnId.js';
export * from './pendingAction.js';
export * from './planCommentPrompt.js';
export * from './sessionStates.js';
export * from './sessionToOpen.js';
