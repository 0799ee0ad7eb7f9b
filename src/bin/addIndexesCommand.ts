/**
 * The command that builds the indexes the current-turn queries need. Named in one place: `migrate`
 * prints it, the worker's start-up warnings name it, and so can any later report of the schema.
 * Never run implicitly: a build can take long on a big table.
 */
export const ADD_INDEXES_COMMAND = 'pending-projector migrate --add-indexes';
