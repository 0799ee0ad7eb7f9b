import { SETTINGS, isSecretSetting, namesOf, type SettingName } from './config.js';
import { redactCredentials } from './redaction.js';
import { wrapText } from './textWrap.js';

/** Help lines for the settings a command uses: the names on one line, the meaning wrapped below. */
export function describeSettings(only: readonly SettingName[]): string {
  return only
    .map((name) => {
      const s = SETTINGS[name];
      const alias = namesOf(name)[1];
      const aka = alias ? `; alias --${alias.flag} / ${alias.env}` : '';
      const shown = isSecretSetting(name) ? 'secret, never shown' : `default: ${redactCredentials(JSON.stringify(s.default))}`;
      return `${wrapText(`--${s.flag}, ${s.env} (${shown}${aka})`, HELP_WIDTH, '      ', '  ')}\n${wrapText(s.help, HELP_WIDTH, '      ')}`;
    })
    .join('\n');
}

/** Columns `--help` fits in. */
export const HELP_WIDTH = 100;
